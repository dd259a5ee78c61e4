"""docs/architecture.md: imports only downward, heavy imports lazy, one importer per heavy library."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "cuda_agent_cli"

# library -> the package folder that alone may import it
OWNERS = {"litellm": "model", "git": "writeback", "textual": "tui", "ray": "bench", "matplotlib": "bench"}


def _imports(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name.split(".")[0], node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module.split(".")[0], node.lineno))
    return found


def floors() -> dict[str, int]:
    """room -> floor, from the table in docs/architecture.md ("The map: floors and allowed arrows")."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    found: dict[str, int] = {}
    for m in re.finditer(r"^\| (\d+) \| ([^|]+) \|", text, flags=re.M):
        for room in re.findall(r"`([^`]+)`", m.group(2)):
            found[room] = int(m.group(1))
    return found


def _room(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _package_imports(path: Path) -> list[tuple[str, int]]:
    """(room imported, line) for every import of cuda_agent_cli's own modules, TYPE_CHECKING ones too."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "cuda_agent_cli":
                names = [f"cuda_agent_cli.{a.name}" for a in node.names]
            else:
                names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] != "cuda_agent_cli" or len(parts) == 1:
                continue
            room = parts[1]
            is_room = (PACKAGE / room).is_dir() or (PACKAGE / f"{room}.py").is_file()
            found.append((room if is_room else "__init__", node.lineno))
    return found


def test_every_room_of_the_package_has_a_floor() -> None:
    table = floors()
    rooms = {_room(p) for p in PACKAGE.rglob("*.py")}
    assert not rooms - set(table), f"rooms missing from docs/architecture.md: {sorted(rooms - set(table))}"
    assert not set(table) - rooms - {"assets"}, f"rooms that no longer exist: {sorted(set(table) - rooms)}"


def test_every_import_runs_down_the_table() -> None:
    table = floors()
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        room = _room(path)
        for target, line in _package_imports(path):
            if target != room and table[target] >= table[room]:
                offenders.append(
                    f"{path.relative_to(PACKAGE)}:{line}: {room} (floor {table[room]}) imports "
                    f"{target} (floor {table[target]})"
                )
    assert not offenders, "imports that do not run down docs/architecture.md's table:\n" + "\n".join(offenders)


def test_heavy_libraries_are_imported_only_by_their_owner() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        for name, line in _imports(path):
            owner = OWNERS.get(name)
            if owner and rel.parts[0] != owner:
                offenders.append(f"{rel}:{line} imports {name} (only {owner}/ may)")
    assert not offenders, "\n".join(offenders)


def test_help_imports_no_heavy_module() -> None:
    code = (
        "import sys\n"
        "from cuda_agent_cli import cli\n"
        "try:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print('HEAVY:' + ','.join(sorted(m for m in ('torch', 'litellm', 'textual', 'git', 'ray', 'matplotlib') if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    heavy = next(ln for ln in out.stdout.splitlines() if ln.startswith("HEAVY:"))
    assert heavy == "HEAVY:", f"`cuda-agent --help` imported {heavy[6:]}"


def test_every_subcommand_help_imports_no_heavy_module() -> None:
    import typer

    from cuda_agent_cli.cli.app import app

    names = sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    code = (
        "import sys\n"
        "from cuda_agent_cli import cli\n"
        f"for name in {names!r}:\n"
        "    try:\n        cli.main([name, '--help'])\n    except SystemExit:\n        pass\n"
        "print('HEAVY:' + ','.join(sorted(m for m in ('torch', 'litellm', 'textual', 'git', 'ray', 'matplotlib') if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    heavy = next(ln for ln in out.stdout.splitlines() if ln.startswith("HEAVY:"))
    assert heavy == "HEAVY:", f"some subcommand's --help imported {heavy[6:]}"


def test_the_chat_stands_below_its_screens_and_imports_no_textual() -> None:
    """chat/ is the chat session apart from its screen: tui/ may import it, never the reverse, and
    nothing in it imports textual, not even lazily."""
    table = floors()
    assert table["chat"] < table["tui"], "docs/architecture.md must put chat below tui"
    offenders = [
        f"{path.relative_to(PACKAGE)}:{line}"
        for path in (PACKAGE / "chat").rglob("*.py")
        for name, line in _imports(path)
        if name == "textual"
    ]
    offenders += [
        f"{path.relative_to(PACKAGE)}:{line} imports tui"
        for path in (PACKAGE / "chat").rglob("*.py")
        for room, line in _package_imports(path)
        if room == "tui"
    ]
    assert not offenders, "\n".join(offenders)

"""docs/architecture.md: imports only downward, heavy imports lazy, one importer per heavy library."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "cuda_agent_cli"

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

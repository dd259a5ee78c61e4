"""Task suites: a KernelBench checkout, a folder of task files, or JSONL rows with a `code` field.

Loading is pure file reading: nothing here imports a task. A task whose source has no `class
Model` or no `get_inputs()` is kept with its `error` set, so a run reports it and goes on.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent_cli.errors import BadInput

SUITE_KINDS = ("kernelbench", "folder", "jsonl")
# KernelBench keeps a task's original definition beside a revised one as N_Name_OLD.py: "current"
# runs the revised tasks, "original" the original definition wherever one is kept.
TASK_VERSIONS = ("current", "original")
_OLD = "_OLD"
_LEVEL_DIR = re.compile(r"^level_?(\d+)$")
_TASK_FILE = re.compile(r"^(\d+)_(.+)\.py$")

KERNELBENCH_LAYOUT = (
    "expected a KernelBench checkout: DIR/KernelBench/level1/1_Name.py (or level1/, level2/, ... "
    "directly under DIR), each file with class Model and get_inputs()"
)
FOLDER_LAYOUT = (
    "expected a folder of task files in KernelBench format (N_Name.py with class Model and "
    "get_inputs()), directly in DIR or in level1/, level2/, ... folders"
)
JSONL_LAYOUT = 'expected a JSONL file with one task a line: {"code": "<python source>", "name": ..., "level": ...}'


@dataclass(frozen=True)
class BenchTask:
    """One task of a suite. `key` is unique in the suite and names the task in every output."""

    key: str
    level: int | None
    problem_id: int
    name: str
    source: str
    origin: str  # where it came from: a file path, or FILE:LINE for JSONL
    error: str | None = None  # why this task cannot run (no Model, no get_inputs, bad syntax)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()


@dataclass
class Suite:
    kind: str
    root: Path
    tasks: list[BenchTask]
    identity: dict[str, Any] = field(default_factory=dict)


def task_problems(source: str) -> str | None:
    """Why a task source cannot be benched, or None: it needs class Model and get_inputs()."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return f"the task does not parse: line {exc.lineno}: {exc.msg}"
    names = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    names |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    missing = [what for what, name in (("class Model", "Model"), ("get_inputs()", "get_inputs")) if name not in names]
    if missing:
        return f"the task has no {' and no '.join(missing)} (KernelBench format needs both)"
    return None


def parse_id_ranges(text: str | None) -> set[int] | None:
    """'1-20,40' -> {1..20, 40}; None or '' -> None (every task)."""
    if text is None or not text.strip():
        return None
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:\s*-\s*(\d+))?", part)
        if not m:
            raise BadInput(f"cannot read {part!r} in {text!r}", "give numbers and ranges such as 1-20,40")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        if hi < lo:
            raise BadInput(f"range {part!r} runs backwards", "write the smaller number first, e.g. 3-7")
        out.update(range(lo, hi + 1))
    return out


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def _file_task(path: Path, level: int | None, fallback_id: int) -> BenchTask:
    m = _TASK_FILE.match(path.name)
    problem_id, name = (int(m.group(1)), m.group(2)) if m else (fallback_id, path.stem)
    name = name.removesuffix(_OLD)  # an original version keeps its task's name and key
    source = _read(path)
    stem = f"{problem_id}_{name}"
    key = f"level{level}/{stem}" if level is not None else stem
    return BenchTask(key, level, problem_id, name, source, str(path), task_problems(source))


def _level_dirs(root: Path) -> dict[int, Path]:
    found: dict[int, Path] = {}
    if root.is_dir():
        for p in sorted(root.iterdir()):
            m = _LEVEL_DIR.match(p.name)
            if p.is_dir() and m:
                found[int(m.group(1))] = p
    return found


def _task_files(folder: Path, version: str = "current") -> list[Path]:
    files = [p for p in folder.iterdir() if p.is_file() and p.suffix == ".py" and not p.name.startswith(("_", "."))]
    originals = {p.name.replace(f"{_OLD}.py", ".py"): p for p in files if p.stem.endswith(_OLD)}
    files = [p for p in files if not p.stem.endswith(_OLD)]
    if version == "original":
        # The original definition in place of the revised one; an original whose revised file
        # is gone still stands for its task.
        files = [originals.pop(p.name, p) for p in files] + list(originals.values())

    # Numeric order (2 before 10), the way KernelBench numbers its problems.
    def number(name: str) -> int:
        m = _TASK_FILE.match(name)
        return int(m.group(1)) if m else 1 << 30

    return sorted(files, key=lambda p: (number(p.name), p.name))


def _from_levels(levels: dict[int, Path], version: str) -> list[BenchTask]:
    tasks: list[BenchTask] = []
    for level, folder in sorted(levels.items()):
        for i, f in enumerate(_task_files(folder, version), 1):
            tasks.append(_file_task(f, level, i))
    return tasks


def _load_kernelbench(root: Path, version: str) -> list[BenchTask]:
    for base in (root / "KernelBench", root):
        levels = _level_dirs(base)
        if levels:
            return _from_levels(levels, version)
    raise BadInput(f"{root} is not a KernelBench checkout", KERNELBENCH_LAYOUT)


def _load_folder(root: Path, version: str) -> list[BenchTask]:
    levels = _level_dirs(root)
    if levels:
        tasks = _from_levels(levels, version)
    else:
        tasks = [_file_task(f, None, i) for i, f in enumerate(_task_files(root, version), 1)]
    if not tasks:
        raise BadInput(f"{root} holds no task files", FOLDER_LAYOUT)
    return tasks


def _load_jsonl(path: Path) -> list[BenchTask]:
    if not path.is_file():
        raise BadInput(f"{path} is not a file", JSONL_LAYOUT)
    tasks: list[BenchTask] = []
    seen: set[str] = set()
    for lineno, line in enumerate(_read(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise BadInput(f"{path}:{lineno} is not valid JSON ({exc})", JSONL_LAYOUT) from None
        if not isinstance(row, dict) or not isinstance(row.get("code"), str):
            raise BadInput(f'{path}:{lineno} has no string field "code"', JSONL_LAYOUT)
        level = row.get("level")
        level = int(level) if isinstance(level, (int, str)) and str(level).isdigit() else None
        pid = row.get("problem_id", row.get("id"))
        pid = int(pid) if isinstance(pid, (int, str)) and str(pid).isdigit() else len(tasks) + 1
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(row.get("name") or f"row{lineno}"))[:80]
        key = f"level{level}/{pid}_{name}" if level is not None else f"{pid}_{name}"
        if key in seen:
            key = f"{key}_line{lineno}"
        seen.add(key)
        tasks.append(BenchTask(key, level, pid, name, row["code"], f"{path}:{lineno}", task_problems(row["code"])))
    if not tasks:
        raise BadInput(f"{path} holds no tasks", JSONL_LAYOUT)
    return tasks


def git_commit(root: Path) -> dict[str, Any] | None:
    """The commit of the checkout holding `root`, and whether its suite files differ from it."""
    folder = root if root.is_dir() else root.parent
    try:
        head = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(folder), "status", "--porcelain", "--", "."], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": head.stdout.strip(), "dirty": bool(dirty.stdout.strip())}


def suite_hash(tasks: list[BenchTask]) -> str:
    """One hash over every task's key and source: two suites agree on it only with equal tasks."""
    h = hashlib.sha256()
    for t in sorted(tasks, key=lambda t: t.key):
        h.update(t.key.encode() + b"\0" + t.sha256.encode() + b"\n")
    return h.hexdigest()


def load_suite(
    kind: str, root: Path, levels: set[int] | None = None, ids: set[int] | None = None, version: str = "current"
) -> Suite:
    """The suite at `root`, narrowed to `levels` and problem `ids`; its identity covers all of it.
    `version`: the revised tasks ("current") or their original definitions ("original")."""
    if kind not in SUITE_KINDS:
        raise BadInput(f"unknown suite {kind!r}", "use --suite kernelbench, folder or jsonl")
    if version not in TASK_VERSIONS:
        raise BadInput(f"unknown task version {version!r}", "use --task-version current or --task-version original")
    root = Path(root).expanduser().absolute()
    if not root.exists():
        raise BadInput(
            f"{root} does not exist",
            {"kernelbench": KERNELBENCH_LAYOUT, "folder": FOLDER_LAYOUT, "jsonl": JSONL_LAYOUT}[kind],
        )
    if kind == "jsonl":
        everything = _load_jsonl(root)
    elif not root.is_dir():
        raise BadInput(f"{root} is not a directory", KERNELBENCH_LAYOUT if kind == "kernelbench" else FOLDER_LAYOUT)
    else:
        everything = _load_kernelbench(root, version) if kind == "kernelbench" else _load_folder(root, version)
    chosen = [t for t in everything if (levels is None or t.level in levels) and (ids is None or t.problem_id in ids)]
    if not chosen:
        have = sorted({t.level for t in everything if t.level is not None})
        raise BadInput(
            f"no task of {root} matches the --level/--tasks given",
            f"levels present: {', '.join(map(str, have)) or 'none'}; {len(everything)} tasks in all",
        )
    identity = {
        "kind": kind,
        "root": str(root),
        "task_version": version,
        "git": git_commit(root),
        "tasks_sha256": suite_hash(everything),
        "tasks": len(everything),
        "selected_sha256": suite_hash(chosen),
        "selected": len(chosen),
    }
    return Suite(kind, root, chosen, identity)

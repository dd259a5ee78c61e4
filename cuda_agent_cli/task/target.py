"""Target spec -> Target, and the Task that resolving it yields.

`path/to/file.py::Class` or `pkg.module:Class`. Parsing is pure: the file must exist, and the
class is checked later by the probe (task/probe.py), in a subprocess started in the user's
repository (task/resolve.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent_cli.errors import TargetError
from cuda_agent_cli.task.inputs import CallSpec

TARGET_HINT = "write it as path/to/file.py::ClassName or package.module:ClassName"
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Target:
    """Where the class lives and how Python finds it."""

    text: str  # as the user wrote it
    class_name: str
    module_name: str  # dotted import name
    file: Path | None  # the module file (None until probed for the pkg.module form)
    import_paths: tuple[Path, ...]  # sys.path entries, first wins
    repo_root: Path  # git root, else the nearest pyproject.toml's folder, else import root

    @property
    def display(self) -> str:
        if self.file is not None:
            try:
                return f"{self.file.relative_to(self.repo_root)}::{self.class_name}"
            except ValueError:
                return f"{self.file}::{self.class_name}"
        return self.text


@dataclass(frozen=True)
class Case:
    """One more call the kernel is verified and timed on, beside the task's first."""

    call: CallSpec
    count: int | None = None  # calls of this signature the user's command made (--capture)
    output: dict[str, Any] = field(default_factory=lambda: {"kind": "tensor"})
    parameters: tuple[tuple[str, str, tuple[int, ...]], ...] = ()


@dataclass(frozen=True)
class Task:
    """Everything later stages need about the reference, computed once."""

    target: Target
    file: Path
    call: CallSpec
    forward_params: tuple[str, ...]
    class_source: str
    class_start: int  # 1-based first line of the class statement (decorators included)
    class_end: int  # 1-based last line
    module_source: str
    module_sha256: str
    standalone: bool
    uses_module_inputs: bool  # get_inputs() of the module itself is the input source
    parameters: tuple[tuple[str, str, tuple[int, ...]], ...] = field(default=())  # name, dtype, shape
    training_sensitive: bool = False  # has dropout/batch norm: output depends on .training
    reference_source: str = ""
    # What forward returns: {"kind": "tensor"|"tuple"|"list", "tensors": [{"dtype", "shape"}]}.
    output: dict[str, Any] = field(default_factory=lambda: {"kind": "tensor"})
    count: int | None = None  # calls of the first signature the user's command made (--capture)
    more: tuple[Case, ...] = ()  # further calls: other shapes the program uses

    def cases(self) -> list[Case]:
        """Every call the kernel is verified on, the first (the one the session optimizes for) first."""
        return [Case(self.call, self.count, self.output, self.parameters), *self.more]

    @property
    def class_snake(self) -> str:
        return snake_case(self.target.class_name)


def snake_case(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    s = re.sub(r"(?<=[A-Z])([A-Z][a-z])", r"_\1", s)
    return s.lower()


# ---------------------------------------------------------------- target parsing (pure)


def find_repo_root(start: Path) -> Path | None:
    """The nearest folder at or above `start` that holds .git."""
    for d in (start, *start.parents):
        if (d / ".git").exists():
            return d
    return None


def repository_of(folder: Path) -> Path:
    """The repository a folder belongs to: the nearest folder at or above it that holds .git, else
    the nearest with a pyproject.toml, else the folder itself. What `--continue` and `cuda-agent
    sessions` call "this repository"."""
    folder = Path(folder).expanduser().resolve()
    found = find_repo_root(folder)
    if found is None:
        found = next((d for d in (folder, *folder.parents) if (d / "pyproject.toml").is_file()), folder)
    return found


def _package_root(file: Path) -> tuple[str, Path]:
    """(dotted module name, sys.path entry) from the chain of __init__.py above `file`."""
    parts = [file.stem]
    d = file.parent
    while (d / "__init__.py").is_file() and _IDENT.match(d.name):
        parts.insert(0, d.name)
        d = d.parent
    return ".".join(parts), d


def parse_target(text: str, cwd: Path) -> Target:
    """Split and check the target text; the file must exist (the class is checked by the probe)."""
    text = text.strip()
    if "::" in text:
        path_text, _, cls = text.rpartition("::")
        if not path_text or not _IDENT.match(cls):
            raise TargetError(f"`{text}` is not a valid target", TARGET_HINT)
        file = (cwd / path_text).resolve()
        if not file.is_file():
            raise TargetError(f"{path_text}: no such file", f"check the path (it is relative to {cwd})")
        if file.suffix != ".py":
            raise TargetError(f"{path_text} is not a Python file", TARGET_HINT)
        module, root = _package_root(file)
        repo = find_repo_root(file.parent)
        if repo is None:
            pyproject = next((d for d in file.parents if (d / "pyproject.toml").is_file()), None)
            repo = pyproject or root
        paths = [root]
        if repo in root.parents:
            paths.append(repo)  # absolute imports of other top-level folders of the repository
        return Target(text, cls, module, file, tuple(paths), repo)
    if ":" in text:
        module, _, cls = text.rpartition(":")
        if not all(_IDENT.match(p) for p in module.split(".")) or not _IDENT.match(cls):
            raise TargetError(f"`{text}` is not a valid target", TARGET_HINT)
        repo = find_repo_root(cwd) or cwd
        paths = [cwd] if cwd == repo else [cwd, repo]
        return Target(text, cls, module, None, tuple(paths), repo)
    raise TargetError(f"`{text}` does not name a class", TARGET_HINT)

"""Workspaces: what the agent edits, what is locked, and where builds go.

A session workspace (docs/architecture.md, "Contracts") is materialized from the packaged sandbox/ template next to a
store/ of pristine copies and lock hashes, and a build/ directory the agent cannot write.
Existing directories given to `cuda-agent verify|profile` (a CUDA-Agent agent_workdir or a
KernelBench pair) are used as they are: their build directory lives in the user cache dir so
nothing is ever written inside them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from cuda_agent_cli import resources
from cuda_agent_cli.config import Policy
from cuda_agent_cli.errors import WorkspaceError
from cuda_agent_cli.kernel_files import CANDIDATE, KERNELS, KernelFiles

REFERENCE = "model.py"
BINDING_FILES = ("binding.cpp", "binding_registry.h")
SKILL = "SKILL.md"
LOCKS_FILE = "locks.json"
# Never copied from the template: they make sandbox/ a Python package, not part of a workspace.
_TEMPLATE_SKIP = {"__init__.py", "__pycache__"}


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """$XDG_CACHE_HOME/cuda-agent: build outputs and baseline timings, safe to delete."""
    env = os.environ if env is None else env
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME", str(Path.home()))) / ".cache")
    return Path(base) / "cuda-agent"


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def candidate_digest(root: Path) -> str | None:
    """What makes a candidate one kernel: the digest of its files (`KernelFiles.read(root)`:
    model_new.py and the kernel sources in kernels/). Two harness results with the same digest
    judged the same kernel. None when `root` holds no candidate."""
    return KernelFiles.read(root).digest()


@dataclass(frozen=True)
class Workspace:
    """Where a candidate lives and what the harness trusts about it.

    `reference` and `binding_dir` point at the pristine copies the harness builds and runs;
    `root` is what the agent edits. `locked` maps workspace-relative paths to the sha256 they
    must keep; `kind` is "session", "workdir" (CUDA-Agent layout) or "kernelbench" (a pair
    whose model_new.py builds its own extension with load_inline).
    """

    root: Path
    reference: Path
    candidate: Path
    build_dir: Path
    kind: str
    store: Path | None = None
    binding_dir: Path | None = None
    locked: dict[str, str] = field(default_factory=dict)

    @property
    def kernels_dir(self) -> Path:
        return self.root / KERNELS

    def lock_violations(self) -> list[str]:
        """One line per locked file that was changed, removed or replaced by a link."""
        problems: list[str] = []
        for rel, digest in sorted(self.locked.items()):
            path = self.root / rel
            if path.is_symlink():
                problems.append(f"{rel} was replaced by a symbolic link")
            elif not path.is_file():
                problems.append(f"{rel} was removed")
            elif sha256_file(path) != digest:
                problems.append(f"{rel} was modified")
        return problems


def _make_read_only(path: Path) -> None:
    path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)


def create_workspace(
    session_dir: Path,
    reference_source: str,
    candidate_source: str | None = None,
    kernels: Mapping[str, str] | None = None,
) -> Workspace:
    """Materialize session_dir/{workspace,store,build} for one task.

    `candidate_source` and `kernels` (file name -> text) seed model_new.py and kernels/, for
    resumed sessions and tests; the agent normally writes them itself.
    """
    session_dir = Path(session_dir)
    root, store, build = session_dir / "workspace", session_dir / "store", session_dir / "build"
    if root.exists():
        raise WorkspaceError(f"{root} already exists", "open it with open_workspace() or pick a new session dir")
    template = resources.sandbox_template_dir()
    shutil.copytree(template, root, ignore=shutil.ignore_patterns(*_TEMPLATE_SKIP))
    (root / KERNELS).mkdir(exist_ok=True)
    store.mkdir(parents=True, exist_ok=True)
    build.mkdir(parents=True, exist_ok=True)

    (root / REFERENCE).write_text(reference_source)
    locked_names = [REFERENCE, *BINDING_FILES]
    skill = resources.skill_path()
    if skill.is_file():
        shutil.copyfile(skill, root / SKILL)
        locked_names.append(SKILL)
    for name in kernels or {}:
        if "/" in name or name.startswith("."):
            raise WorkspaceError(f"kernel file name {name!r} is not a plain file name", "use names like add.cpp")
    KernelFiles.from_sources(candidate_source, kernels).write(root)

    locked: dict[str, str] = {}
    for name in locked_names:
        shutil.copyfile(root / name, store / name)
        locked[name] = sha256_file(store / name)
        _make_read_only(root / name)
        _make_read_only(store / name)
    (store / LOCKS_FILE).write_text(json.dumps(locked, indent=2, sort_keys=True))
    return _session_workspace(session_dir, locked)


def _session_workspace(session_dir: Path, locked: dict[str, str]) -> Workspace:
    store = session_dir / "store"
    return Workspace(
        root=session_dir / "workspace",
        reference=store / REFERENCE,
        candidate=session_dir / "workspace" / CANDIDATE,
        build_dir=session_dir / "build",
        kind="session",
        store=store,
        binding_dir=store,
        locked=locked,
    )


def open_workspace(session_dir: Path) -> Workspace:
    """Reopen a session workspace made by create_workspace (lock hashes from store/)."""
    session_dir = Path(session_dir)
    locks = session_dir / "store" / LOCKS_FILE
    if not locks.is_file():
        raise WorkspaceError(f"{session_dir} is not a cuda-agent session", "create it with create_workspace()")
    return _session_workspace(session_dir, json.loads(locks.read_text()))


def _external_build_dir(*paths: Path) -> Path:
    key = hashlib.sha256("\0".join(str(p.resolve()) for p in paths).encode()).hexdigest()[:16]
    return cache_dir() / "builds" / key


def external_workspace(path: Path) -> Workspace:
    """An existing directory as given: a CUDA-Agent agent_workdir or a KernelBench pair.

    The reference is PATH/model.py itself; its build directory is under the user cache dir.
    """
    path = Path(path).absolute()
    if not path.exists():
        raise WorkspaceError(f"{path} does not exist", "pass a directory with model.py and model_new.py")
    if not path.is_dir():
        raise WorkspaceError(
            f"{path} is not a directory",
            "pass a directory with model.py and model_new.py, or use --ref FILE --candidate FILE",
        )
    for name in (REFERENCE, CANDIDATE):
        if not (path / name).is_file():
            raise WorkspaceError(
                f"{path} has no {name}",
                f"put the {'reference Model' if name == REFERENCE else 'optimized ModelNew'} in {path / name}",
            )
    has_bindings = all((path / b).is_file() for b in BINDING_FILES)
    kind = "workdir" if has_bindings else "kernelbench"
    return Workspace(
        root=path,
        reference=path / REFERENCE,
        candidate=path / CANDIDATE,
        build_dir=_external_build_dir(path),
        kind=kind,
        binding_dir=path if has_bindings else None,
    )


def pair_workspace(reference: Path, candidate: Path) -> Workspace:
    """A reference file and a candidate file anywhere (`--ref FILE --candidate FILE`).

    When the candidate sits beside binding.cpp/binding_registry.h, its kernels/ are built too.
    """
    reference, candidate = Path(reference).absolute(), Path(candidate).absolute()
    for label, p in (("--ref", reference), ("--candidate", candidate)):
        if not p.is_file():
            raise WorkspaceError(f"{label} {p} is not a file", f"pass the path of a Python file to {label}")
    root = candidate.parent
    has_bindings = all((root / b).is_file() for b in BINDING_FILES)
    return Workspace(
        root=root,
        reference=reference,
        candidate=candidate,
        build_dir=_external_build_dir(reference, candidate),
        kind="workdir" if has_bindings else "kernelbench",
        binding_dir=root if has_bindings else None,
    )


def judging_workspace(base: Path, reference: str, files: KernelFiles, device: str, policy: Policy) -> Workspace:
    """A workspace under `base` for exactly these files, to judge a kernel outside its session
    (`check`, a session's other shapes), kept in the cache: judging unchanged files again reuses
    the build folder, so nothing is recompiled."""
    import tempfile

    model_new, kernels = files.model_new or "", files.kernels
    h = hashlib.sha256()
    for part in (device, policy, reference, model_new, *(f"{n}\0{t}" for n, t in sorted(kernels.items()))):
        h.update(part.encode() + b"\0")
    final = base / h.hexdigest()[:20]
    if (final / "store" / LOCKS_FILE).is_file():
        ws = open_workspace(final)
        # The files judged are the repository's, whatever an earlier run left in the folder.
        KernelFiles.from_sources(model_new, kernels).write(ws.root)
        return ws
    tmp = Path(tempfile.mkdtemp(prefix="new-", dir=base))
    create_workspace(tmp / "session", reference, model_new, kernels)
    try:
        os.rename(tmp / "session", final)
    except OSError:  # made by a check running beside this one, or left half-made: start anew
        shutil.rmtree(final, ignore_errors=True)
        os.rename(tmp / "session", final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return open_workspace(final)

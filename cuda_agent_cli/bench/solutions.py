"""Existing candidates for harness-only mode (`--solutions DIR`), matched to a suite's tasks.

Two layouts are read as they are:
- KernelBench run folders: `level_{L}_problem_{P}_sample_{S}_kernel.py`, each a single-file
  `load_inline` candidate (class ModelNew), anywhere under DIR;
- CUDA-Agent workdirs: a folder with `model_new.py` (and `kernels/`), named
  `level_{L}_problem_{P}[_sample_{S}]`, or `level{L}/{P}_{Name}/[sample_{S}/]`.
A workdir's own model.py and binding files are never used: the suite's task is the reference
and the binding files come from the package, so a solution cannot bring its own judge.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from cuda_agent_cli.bench.suite import BenchTask
from cuda_agent_cli.errors import BadInput
from cuda_agent_cli.kernel_files import CANDIDATE, KernelFiles

_KB_FILE = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")
_KB_DIR = re.compile(r"^level_(\d+)_problem_(\d+)(?:_sample_(\d+))?$")
_LEVEL = re.compile(r"^level_?(\d+)$")
_PROBLEM = re.compile(r"^(\d+)_.+$")
_SAMPLE = re.compile(r"^sample_?(\d+)$")


@dataclass(frozen=True)
class Sample:
    """One candidate for one task: a single file (kernelbench) or a workdir (workdir)."""

    level: int | None
    problem_id: int
    index: int
    kind: str  # "kernelbench" | "workdir"
    path: Path  # the _kernel.py file, or the workdir

    def files(self) -> dict[str, bytes]:
        """The candidate's files as the harness will see them (relative path -> bytes)."""
        if self.kind == "kernelbench":
            return {CANDIDATE: self.path.read_bytes()}
        return dict(KernelFiles.read(self.path).files)

    def to_json(self) -> dict[str, object]:
        """With the files' contents, so a worker on another node needs no access to the folder."""
        return {
            "level": self.level,
            "problem_id": self.problem_id,
            "index": self.index,
            "kind": self.kind,
            "path": str(self.path),
            "files": {rel: base64.b64encode(data).decode() for rel, data in self.files().items()},
        }


def sample_files(obj: dict) -> dict[str, bytes]:
    """The files a sample's JSON carries (see Sample.to_json)."""
    return {rel: base64.b64decode(data) for rel, data in obj["files"].items()}


def _workdir_ident(parts: tuple[str, ...]) -> tuple[int | None, int | None, int]:
    level = problem = sample = None
    for part in parts:
        if m := _KB_DIR.match(part):
            level, problem = int(m.group(1)), int(m.group(2))
            if m.group(3) is not None:
                sample = int(m.group(3))
        elif m := _LEVEL.match(part):
            level = int(m.group(1))
        elif m := _SAMPLE.match(part):
            sample = int(m.group(1))
        elif (m := _PROBLEM.match(part)) and problem is None:
            problem = int(m.group(1))
    return level, problem, sample if sample is not None else 0


def find_samples(root: Path) -> list[Sample]:
    """Every candidate under `root`; raises BadInput when there is none in either layout."""
    root = Path(root).expanduser().absolute()
    if not root.is_dir():
        raise BadInput(
            f"--solutions {root} is not a directory", "pass a KernelBench run folder or a folder of CUDA-Agent workdirs"
        )
    samples: list[Sample] = []
    for p in sorted(root.rglob("*.py")):
        if p.is_symlink():
            continue
        if m := _KB_FILE.match(p.name):
            samples.append(Sample(int(m.group(1)), int(m.group(2)), int(m.group(3)), "kernelbench", p))
        elif p.name == "model_new.py":
            level, problem, sample = _workdir_ident(p.parent.relative_to(root).parts)
            if problem is not None:
                samples.append(Sample(level, problem, sample, "workdir", p.parent))
    if not samples:
        raise BadInput(
            f"no candidates found under {root}",
            "expected level_{L}_problem_{P}_sample_{S}_kernel.py files (KernelBench runs) or "
            "workdirs with model_new.py named level_{L}_problem_{P} or level{L}/{P}_{Name}/",
        )
    return samples


def samples_for(task: BenchTask, samples: list[Sample]) -> list[Sample]:
    """The task's candidates in sample order; a task of a suite without levels matches any level."""
    mine = [
        s
        for s in samples
        if s.problem_id == task.problem_id and (task.level is None or s.level is None or s.level == task.level)
    ]
    return sorted(mine, key=lambda s: (s.index, s.kind, str(s.path)))


def samples_sha256(samples: list[Sample]) -> str:
    """A hash of every file of the task's candidates: a changed candidate is scored again on resume."""
    h = hashlib.sha256()
    for s in samples:
        h.update(f"{s.index}:{s.kind}\n".encode())
        for rel, data in sorted(s.files().items()):
            h.update(rel.encode() + b"\0" + hashlib.sha256(data).hexdigest().encode() + b"\n")
    return h.hexdigest()

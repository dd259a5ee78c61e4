"""A candidate's files: `model_new.py` and the kernel sources in `kernels/`, read by one rule.

Every place that reads a kernel folder (a session's workspace, its best snapshot, an integrated
kernel's folder in the user's repository, a bench solution) reads it through `KernelFiles.read`,
so they all see the files the harness builds and nothing else:
- `model_new.py` at the top of the folder;
- the files directly in `kernels/` whose suffix the build compiles or includes (the locked
  tools/compile_kernels.py's KERNEL_SUFFIXES); no sub-folders (nothing builds from them), so no
  `__pycache__`;
- regular files only: a symbolic link is never followed (it could point at a locked file, the
  build folder or anywhere else), and dot files (the template's `kernels/.keep`) are left out.

The contents are held as bytes, so a snapshot or a bench solution carries the files exactly;
`texts()`, `model_new` and `kernels` decode them (undecodable bytes replaced) for the places that
want text.
"""

from __future__ import annotations

import hashlib
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Mapping

CANDIDATE = "model_new.py"
KERNELS = "kernels"
# What the build compiles or includes: tools/compile_kernels.py's KERNEL_SUFFIXES.
KERNEL_SUFFIXES = (".cu", ".cpp", ".cc", ".h", ".cuh", ".hpp", ".inl")


def is_kernel_name(name: str) -> bool:
    """A name in kernels/ the rule keeps: not a dot file, one of the suffixes that build."""
    return not name.startswith(".") and PurePosixPath(name).suffix in KERNEL_SUFFIXES


def _regular_file(path: Path) -> bool:
    """A regular file itself, not a link to one."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def _rel_kept(rel: str) -> bool:
    """Whether a folder-relative path is one of a candidate's files."""
    parts = PurePosixPath(rel).parts
    if parts == (CANDIDATE,):
        return True
    return len(parts) == 2 and parts[0] == KERNELS and is_kernel_name(parts[1])


@dataclass(frozen=True)
class KernelFiles:
    """model_new.py and kernels/*, as folder-relative posix path -> content (sorted, model_new.py
    first). Build one with `read` (a folder) or `of` (paths and contents from elsewhere); both
    keep only what the rule keeps."""

    files: Mapping[str, bytes] = field(default_factory=dict)

    @classmethod
    def read(cls, folder: Path) -> KernelFiles:
        """The candidate files in `folder`; empty when it holds none (or does not exist)."""
        folder = Path(folder)
        out: dict[str, bytes] = {}
        candidate = folder / CANDIDATE
        if _regular_file(candidate):
            out[CANDIDATE] = candidate.read_bytes()
        kernels = folder / KERNELS
        if kernels.is_dir() and not kernels.is_symlink():
            for p in sorted(kernels.iterdir()):
                if is_kernel_name(p.name) and _regular_file(p):
                    out[f"{KERNELS}/{p.name}"] = p.read_bytes()
        return cls(out)

    @classmethod
    def of(cls, files: Mapping[str, str | bytes]) -> KernelFiles:
        """From folder-relative paths and contents (text or bytes), keeping only the candidate's
        files: other paths (scratch, build outputs, nested folders) are dropped."""
        kept = {
            rel: (data.encode() if isinstance(data, str) else data) for rel, data in files.items() if _rel_kept(rel)
        }
        return cls(_ordered(kept))

    @classmethod
    def from_sources(cls, model_new: str | None, kernels: Mapping[str, str] | None = None) -> KernelFiles:
        """model_new.py's text and kernels/ as file name -> text; a name that is not a plain
        kernel file name is dropped by the rule, as `read` would never see it."""
        files: dict[str, str | bytes] = {} if model_new is None else {CANDIDATE: model_new}
        files.update({f"{KERNELS}/{name}": text for name, text in (kernels or {}).items() if "/" not in name})
        return cls.of(files)

    def __bool__(self) -> bool:
        return bool(self.files)

    @property
    def model_new(self) -> str | None:
        data = self.files.get(CANDIDATE)
        return None if data is None else data.decode(errors="replace")

    @property
    def kernels(self) -> dict[str, str]:
        """kernels/ as file name -> text."""
        prefix = KERNELS + "/"
        return {
            rel[len(prefix) :]: data.decode(errors="replace")
            for rel, data in self.files.items()
            if rel.startswith(prefix)
        }

    def sources(self) -> dict[str, str]:
        """The kernel sources as folder-relative path (`kernels/add.cu`) -> text, model_new.py left
        out: what the static checks read."""
        return {rel: text for rel, text in self.texts().items() if rel != CANDIDATE}

    def texts(self) -> dict[str, str]:
        """Folder-relative path -> text, model_new.py included."""
        return {rel: data.decode(errors="replace") for rel, data in self.files.items()}

    def digest(self) -> str | None:
        """What makes a candidate one kernel: sha256 over every file's path and content. Two
        harness results with the same digest judged the same kernel; None for no files."""
        if not self.files:
            return None
        h = hashlib.sha256()
        for rel, data in self.files.items():
            h.update(rel.encode() + b"\0" + str(len(data)).encode() + b"\0" + data)
        return h.hexdigest()

    def write(self, folder: Path) -> None:
        """Make `folder` hold these candidate files: model_new.py and each kernel file written
        where its content differs, and every other entry of kernels/ removed (dot files stay: they
        only hold the folder); model_new.py is removed when there is none here."""
        folder = Path(folder)
        kernels_dir = folder / KERNELS
        wanted = {PurePosixPath(rel).name for rel in self.files if rel.startswith(KERNELS + "/")}
        if kernels_dir.is_symlink():  # never written through
            kernels_dir.unlink()
        if wanted:
            kernels_dir.mkdir(parents=True, exist_ok=True)
        for p in kernels_dir.iterdir() if kernels_dir.is_dir() else []:
            if p.name.startswith(".") or (p.name in wanted and _regular_file(p)):
                continue
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
        candidate = folder / CANDIDATE
        if CANDIDATE not in self.files and (candidate.is_symlink() or candidate.exists()):
            candidate.unlink()
        for rel, data in self.files.items():
            path = folder / rel
            if path.is_symlink():
                path.unlink()
            elif _regular_file(path) and path.stat().st_size == len(data) and path.read_bytes() == data:
                continue
            path.write_bytes(data)

    def snapshot(self, dest: Path) -> Path:
        """These files as the whole of the folder `dest`, which replaces what was there in one
        rename (a reader never sees half of it)."""
        dest = Path(dest)
        tmp = dest.with_name(dest.name + ".tmp")
        old = dest.with_name(dest.name + ".old")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for rel, data in self.files.items():
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp / rel).write_bytes(data)
        shutil.rmtree(old, ignore_errors=True)
        if dest.exists():
            dest.rename(old)
        tmp.rename(dest)
        shutil.rmtree(old, ignore_errors=True)
        return dest


def _ordered(files: Mapping[str, bytes]) -> dict[str, bytes]:
    """model_new.py first, then the kernels by name: the order `read` gives and `digest` hashes."""
    return {rel: files[rel] for rel in sorted(files, key=lambda rel: (rel != CANDIDATE, rel))}

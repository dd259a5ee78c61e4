"""File changes and the unified diff that shows them: pure functions, `git apply`-able output."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class FileChange:
    """One file to write: `path` is relative to the repository root; `old` is None for a new file,
    `new` is None for a file to delete."""

    path: str
    new: str | None
    old: str | None = None

    @property
    def is_deleted(self) -> bool:
        return self.new is None and self.old is not None

    @property
    def is_new(self) -> bool:
        return self.old is None

    @property
    def changed(self) -> bool:
        return self.old != self.new


def _lines(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        # git's marker for a last line without a newline, so `git apply` reproduces it exactly.
        lines[-1] = lines[-1] + "\n\\ No newline at end of file\n"
    return lines


def file_diff(change: FileChange, context: int = 3) -> str:
    """The git-style diff of one change ('' when nothing changes)."""
    if not change.changed:
        return ""
    p = change.path
    header = [f"diff --git a/{p} b/{p}\n"]
    a_name, b_name = f"a/{p}", f"b/{p}"
    if change.is_new:
        header.append("new file mode 100644\n")
        a_name = "/dev/null"
    elif change.is_deleted:
        header.append("deleted file mode 100644\n")
        b_name = "/dev/null"
    body = list(
        difflib.unified_diff(
            _lines(change.old or ""), _lines(change.new or ""), fromfile=a_name, tofile=b_name, n=context
        )
    )
    for i, line in enumerate(body[:3]):
        # difflib writes "-1,0" / "+1,0" for an empty side; git expects "0,0".
        if line.startswith("@@"):
            body[i] = line.replace(" -1,0 ", " -0,0 ").replace(" +1,0 ", " +0,0 ")
    return "".join(header + body)


def unified_patch(changes: list[FileChange]) -> str:
    """All changes as one patch, new files after modified ones so the reader sees the edit first."""
    ordered = sorted(changes, key=lambda c: (c.is_new, c.path))
    return "".join(file_diff(c) for c in ordered)


def diff_stats(changes: list[FileChange]) -> tuple[int, int, int]:
    """(files changed, lines added, lines removed)."""
    added = removed = files = 0
    for c in changes:
        if not c.changed:
            continue
        files += 1
        for line in difflib.unified_diff((c.old or "").splitlines(), (c.new or "").splitlines(), lineterm="", n=0):
            if line.startswith("+") and not line.startswith("+++"):
                added += 1
            elif line.startswith("-") and not line.startswith("---"):
                removed += 1
    return files, added, removed


def write_changes(root: Path, changes: list[FileChange]) -> list[Path]:
    """Write (or delete) every changed file under `root`; returns the paths touched."""
    written: list[Path] = []
    for c in changes:
        if not c.changed:
            continue
        dest = root / c.path
        if c.new is None:
            dest.unlink(missing_ok=True)
            written.append(dest)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + ".cuda-agent-tmp")
        tmp.write_text(c.new)
        tmp.replace(dest)
        written.append(dest)
    return written

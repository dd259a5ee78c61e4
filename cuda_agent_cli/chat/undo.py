"""The chat's undo stack: each change the session made to the repository (an approved write by
the agent, a kernel written back), kept in chat.json so a resumed chat can still undo it, and
how each is reverted."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent_cli.chat.approval import FileBackup, restore


@dataclass
class UndoEntry:
    """One change this session made to the repository, newest last; kept in chat.json, so a
    resumed chat can still undo it."""

    kind: str  # "files" (an approved write by the agent) | "apply" (a kernel written back)
    what: str
    backups: list[FileBackup] = field(default_factory=list)
    commit: str | None = None
    branch: str | None = None
    written: list[str] = field(default_factory=list)
    # An uncommitted apply: its files as (path, text before, text written), under repo_root.
    changes: list[tuple[str, str | None, str | None]] = field(default_factory=list)
    repo_root: str | None = None
    session_id: str | None = None  # the optimize session whose kernel an apply wrote

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "what": self.what,
            "backups": [
                {
                    "path": str(b.path),
                    "shown": b.shown,
                    "old": base64.b64encode(b.old).decode("ascii") if b.old is not None else None,
                }
                for b in self.backups
            ],
            "commit": self.commit,
            "branch": self.branch,
            "written": self.written,
            "changes": [list(c) for c in self.changes],
            "repo_root": self.repo_root,
            "session_id": self.session_id,
        }

    @classmethod
    def from_json(cls, data: Any) -> UndoEntry | None:
        if not isinstance(data, dict) or data.get("kind") not in ("files", "apply"):
            return None
        try:
            backups = [
                FileBackup(
                    Path(b["path"]), str(b["shown"]), base64.b64decode(b["old"]) if b.get("old") is not None else None
                )
                for b in data.get("backups") or []
            ]
            changes = [(str(c[0]), c[1], c[2]) for c in data.get("changes") or []]
        except (KeyError, TypeError, ValueError, IndexError):
            return None
        return cls(
            str(data["kind"]),
            str(data.get("what") or ""),
            backups,
            data.get("commit"),
            data.get("branch"),
            [str(w) for w in data.get("written") or []],
            changes,
            data.get("repo_root"),
            data.get("session_id"),
        )


def file_entries(taken: list[list[FileBackup]]) -> list[UndoEntry]:
    """The gate's backups of approved writes (oldest first, one list per write) as undo entries:
    those whose files the write changed."""
    entries = []
    for b in taken:
        changed = [x for x in b if _current(x.path) != x.old]
        if changed:
            entries.append(UndoEntry("files", ", ".join(x.shown for x in changed), backups=changed))
    return entries


def revert(entry: UndoEntry, root: Path) -> str:
    """Put the repository back as it was before `entry`; says what was reverted."""
    from cuda_agent_cli.writeback.diff import FileChange, write_changes
    from cuda_agent_cli.writeback.git import revert_commit

    if entry.kind == "apply" and entry.commit:
        sha = revert_commit(root, entry.commit)
        return (
            f"reverted commit {entry.commit[:10]} ({entry.what}) with commit {sha[:10]} on "
            f"{entry.branch}; files: {', '.join(entry.written)}"
        )
    if entry.kind == "apply":
        back = [FileChange(path, before, written) for path, before, written in entry.changes]
        write_changes(Path(entry.repo_root or root), back)
        return f"put back {len(back)} files written for {entry.what}: {', '.join(entry.written)}"
    return "undid the agent's write: " + "; ".join(restore(entry.backups))


def _current(path: Path) -> bytes | None:
    try:
        return path.read_bytes() if path.is_file() else None
    except OSError:
        return None

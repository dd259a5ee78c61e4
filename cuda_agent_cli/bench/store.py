"""The --out folder: results.jsonl streamed one task at a time, and the run's identity beside it.

A line is written whole and fsynced as soon as its task finishes, so a kill or Ctrl-C loses at
most the tasks still running; a torn last line (killed mid-write) is ignored on reading.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

from cuda_agent_cli.errors import BadInput

RESULTS = "results.jsonl"
RUN = "run.json"
# Settings a resumed run must share with the results already in --out.
_SAME = ("mode", "device", "policy", "model", "reward_baseline", "precision")


class ResultStore:
    def __init__(self, out: Path) -> None:
        self.out = Path(out)
        self.path = self.out / RESULTS

    def load(self) -> dict[str, dict[str, Any]]:
        """task key -> its latest record."""
        found: dict[str, dict[str, Any]] = {}
        if not self.path.is_file():
            return found
        for line in self.path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and isinstance(rec.get("task"), str):
                found[rec["task"]] = rec
        return found

    def append(self, record: dict[str, Any]) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        data = (json.dumps(record, sort_keys=True) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            # A torn line left by a kill would glue onto this one: start on a fresh line.
            if os.fstat(fd).st_size and not _ends_with_newline(self.path):
                data = b"\n" + data
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)

    def claim(self, identity: dict[str, Any], settings: dict[str, Any]) -> None:
        """Record what this folder's results come from; refuse to mix another suite version or setup."""
        path = self.out / RUN
        if path.is_file():
            try:
                before = json.loads(path.read_text())
            except ValueError:
                before = {}
            old = before.get("suite", {}).get("tasks_sha256")
            if old and old != identity.get("tasks_sha256"):
                raise BadInput(
                    f"{self.out} holds results of another version of the suite (task files differ)",
                    "pass a new --out folder, or delete the old results",
                )
            for key in _SAME:
                a, b = before.get("settings", {}).get(key), settings.get(key)
                if key in before.get("settings", {}) and a != b:
                    raise BadInput(
                        f"{self.out} holds results run with {key}={a!r}, not {b!r}",
                        "pass a new --out folder for a different setup",
                    )
        self.out.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"suite": identity, "settings": settings}, indent=2, sort_keys=True))
        os.replace(tmp, path)


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def to_skip(
    done: dict[str, dict[str, Any]], key: str, task_sha: str, solutions_sha: str | None, rerun_failed: bool
) -> bool:
    """A finished task is skipped unless its task or candidates changed, or it failed and
    --rerun-failed asks for the failures again."""
    rec = done.get(key)
    if rec is None or rec.get("task_sha256") != task_sha or rec.get("solutions_sha256") != solutions_sha:
        return False
    return not (rerun_failed and not rec.get("correct"))


def latest(done: dict[str, dict[str, Any]], keys: Iterable[str]) -> list[dict[str, Any]]:
    return [done[k] for k in keys if k in done]

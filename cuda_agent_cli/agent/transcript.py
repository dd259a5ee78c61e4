"""The session transcript: one JSON event a line, each handed to the kernel with one write call
as it happens, so a killed process loses at most the line it was writing.

Surviving a power loss needs fsync as well, which costs milliseconds on a busy disk: the writer
syncs on the events that matter (`Event.durable`: every paid model turn, the start and the stop)
and each of those syncs also covers the lines written before it. `every_line=True` syncs all."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any, Iterator

from cuda_agent_cli.agent.events import Event, event_from_dict, event_to_dict
from cuda_agent_cli.errors import no_space_left

TRANSCRIPT_NAME = "transcript.jsonl"


class TranscriptWriter:
    """Appends events; usable as an event sink. Opening drops a torn last line left by a kill,
    so the next event never gets glued onto a fragment."""

    def __init__(self, path: Path, fsync: bool = True, every_line: bool = False) -> None:
        self.path = path
        self.fsync = fsync
        self.every_line = every_line
        path.parent.mkdir(parents=True, exist_ok=True)
        _drop_torn_tail(path)
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def __call__(self, event: Event) -> None:
        if event.persist:
            self.write(event_to_dict(event), sync=event.durable)

    def write(self, record: dict[str, Any], sync: bool = True) -> None:
        if self._fd is None:
            raise ValueError(f"transcript {self.path} is closed")
        line = (json.dumps(record, ensure_ascii=False, default=str) + "\n").encode("utf-8")
        try:
            # One write call per line: an interrupt lands before or after it, never inside.
            written = os.write(self._fd, line)
            if written != len(line):  # a disk that filled up in the middle of the line
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.path))
            if self.fsync and (sync or self.every_line):
                os.fsync(self._fd)
        except OSError as exc:
            full = no_space_left(exc, f"the session transcript {self.path}")
            if full is None:
                raise
            raise full from exc

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "TranscriptWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _drop_torn_tail(path: Path) -> None:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    if size == 0:
        return
    with open(path, "rb+") as fh:
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) == b"\n":
            return
        fh.seek(0)
        keep = fh.read().rfind(b"\n") + 1
        fh.truncate(keep)


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    """Every complete JSON line; a line torn by a kill (or otherwise unreadable) is skipped."""
    with open(path, "rb") as fh:
        for raw in fh:
            if not raw.endswith(b"\n"):
                return  # torn last line
            try:
                obj = json.loads(raw)
            except ValueError:
                continue
            if isinstance(obj, dict):
                yield obj


def read_events(path: Path) -> Iterator[Event]:
    for record in read_records(path):
        event = event_from_dict(record)
        if event is not None:
            yield event

"""Locked: JSON lines over a pair of pipes, between a harness process and a process it forked.

The pipes are made before the fork, so the channel exists before any candidate code runs and
no file, path or name leads to it: nothing another process writes can land in it. What comes
back from a candidate's process is still only its claim; the reader parses it defensively.
"""

from __future__ import annotations

import json
import os
import select
import time
from typing import Any, Mapping

_LIMIT = 64 * 1024 * 1024  # a reply larger than this is a broken or hostile peer


class ChannelClosed(Exception):
    """The other end went away, sent garbage, or did not answer in time."""

    def __init__(self, message: str, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class Channel:
    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd, self.write_fd = read_fd, write_fd
        self._buffer = b""

    def send(self, message: Mapping[str, Any]) -> None:
        data = (json.dumps(message) + "\n").encode()
        view = memoryview(data)
        try:
            while view:
                written = os.write(self.write_fd, view)
                view = view[written:]
        except OSError as exc:
            raise ChannelClosed(f"the peer stopped reading ({exc})") from exc

    def recv(self, timeout: float | None = None) -> dict[str, Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise ChannelClosed("no answer in time", timed_out=True)
            ready, _, _ = select.select([self.read_fd], [], [], left)
            if not ready:
                raise ChannelClosed("no answer in time", timed_out=True)
            try:
                chunk = os.read(self.read_fd, 1 << 20)
            except OSError as exc:
                raise ChannelClosed(str(exc)) from exc
            if not chunk:
                raise ChannelClosed("the peer closed the channel")
            self._buffer += chunk
            if len(self._buffer) > _LIMIT:
                raise ChannelClosed("the peer sent more than a reply can hold")
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            message = json.loads(line)
        except ValueError as exc:
            raise ChannelClosed("the peer sent something that is not a reply") from exc
        if not isinstance(message, dict):
            raise ChannelClosed("the peer sent something that is not a reply")
        return message

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            try:
                os.close(fd)
            except OSError:
                pass


def pipe_pair() -> tuple[tuple[int, int], tuple[int, int]]:
    """((parent_read, parent_write), (child_read, child_write)) for one channel."""
    to_child_r, to_child_w = os.pipe()
    to_parent_r, to_parent_w = os.pipe()
    return (to_parent_r, to_child_w), (to_child_r, to_parent_w)

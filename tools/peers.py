"""Locked: the controller's two executors as it sees them, each over a channel made before it
was forked: the candidate's process and the baselines' (one it forks, or the worker's baselines
service lent to this evaluation), and the request of a block of calls timed from outside.
"""

from __future__ import annotations

import os
import secrets
import signal
import sys
import time
import traceback
from typing import Any, Callable, Sequence

import channel
import wire
from process_tree import below_but, signal_group

_perf_ns = time.perf_counter_ns


class Peer:
    """One executor, over its channel: asked for calls, stopped while the other one's calls are
    timed, and ended with the evaluation."""

    def __init__(self, name: str, pid: int, chan: channel.Channel, timeout: float) -> None:
        self.name, self.pid, self.chan, self.timeout = name, pid, chan, timeout
        self.exit: str | None = None

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        self.chan.send(request)
        return self.chan.recv(self.timeout)

    def stop(self, spare: tuple[int, ...] = ()) -> list[int]:
        """Stop it and everything else this controller has below it (what it started, and what
        that left behind, reparented here: the controller is their subreaper), but `spare`."""
        signal_group(self.pid, signal.SIGSTOP)
        stopped = below_but((self.pid,), spare)
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGSTOP)
            except (ProcessLookupError, PermissionError):
                pass
        return stopped

    def cont(self, stopped: Sequence[int] = ()) -> None:
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except (ProcessLookupError, PermissionError):
                pass
        signal_group(self.pid, signal.SIGCONT)

    def end(self) -> str:
        """Kill what is left of it and say how it ended."""
        signal_group(self.pid, signal.SIGCONT)
        deadline = time.monotonic() + 2.0
        status = None
        while time.monotonic() < deadline:
            done, st = os.waitpid(self.pid, os.WNOHANG)
            if done:
                status = st
                break
            time.sleep(0.01)
        signal_group(self.pid, signal.SIGKILL)
        if status is None:
            try:
                _, status = os.waitpid(self.pid, 0)
            except ChildProcessError:
                status = 0
        self.chan.close()
        if os.WIFSIGNALED(status):
            try:
                name = signal.Signals(os.WTERMSIG(status)).name
            except ValueError:
                name = f"signal {os.WTERMSIG(status)}"
            self.exit = f"was killed by {name}"
        else:
            self.exit = f"exited with status {os.WEXITSTATUS(status)}"
        return self.exit


class LentService(Peer):
    """The baselines service the worker lent this evaluation: used, never stopped or killed."""

    def __init__(self, pid: int, fds: list[int], timeout: float) -> None:
        super().__init__("baselines", pid, channel.Channel(int(fds[0]), int(fds[1])), timeout)
        self.nonce = secrets.token_hex(8)
        self.finished = False
        self.broken = False  # a request failed: the worker then ends it rather than lend it again

    def open_round(self, spec: wire.EvaluateRequest) -> None:
        """Send the round its part of the evaluation's request (what Baselines.start_round reads)."""
        sent: wire.BaselinesRound = {
            "device": spec["device"],
            "reference": spec["reference"],
            "inputs_dir": spec["inputs_dir"],
            "seeds": spec["seeds"],
            "timed_sets": spec["timed_sets"],
        }
        if "threads" in spec:
            sent["threads"] = spec["threads"]
        if "flush_bytes" in spec:
            sent["flush_bytes"] = spec["flush_bytes"]
        if "plan" in spec:
            sent["plan"] = spec["plan"]
        self.chan.send({"op": "round", "nonce": self.nonce, "spec": sent})

    def ready(self) -> dict[str, Any]:
        """Its answer to this round, past whatever an earlier evaluation left unread."""
        try:
            while True:
                message = self.chan.recv(self.timeout)
                if message.get("nonce") == self.nonce:
                    return message
        except channel.ChannelClosed:
            self.broken = True
            raise

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("op") == "finish":
            self.finished = True
        try:
            return super().ask(request)
        except channel.ChannelClosed:
            self.broken = True
            raise

    def end(self) -> str:
        if not self.finished:
            try:  # lets it drop this round's inputs; its answer is skipped by the next round
                self.chan.send({"op": "finish"})
            except channel.ChannelClosed:
                pass
        self.exit = "kept for the next evaluation"
        return self.exit


def _max_fd() -> int:
    try:
        return os.sysconf("SC_OPEN_MAX")
    except (ValueError, OSError):
        return 4096


def spawn(
    name: str,
    target: Callable[[wire.EvaluateRequest, channel.Channel], None],
    spec: wire.EvaluateRequest,
    timeout: float,
) -> Peer:
    parent_ends, child_ends = channel.pipe_pair()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setpgid(0, 0)  # its own group: stopped and killed as a whole
            keep = sorted({0, 1, 2, *child_ends})
            # Only its own channel and the log: not the controller's result pipe, not the
            # other executor's channel.
            low = 3
            for fd in keep[3:] + [_max_fd()]:
                if fd > low:
                    os.closerange(low, fd)
                low = fd + 1
            target(spec, channel.Channel(*child_ends))
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(child_ends[0])
    os.close(child_ends[1])
    return Peer(name, pid, channel.Channel(*parent_ends), timeout)


def make_calls(peer: Peer, request: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """Ask for a block of calls and time it here, from the moment its seeds leave this process
    to the reply, sent after the executor's last device-wide synchronize (µs). Nothing of the
    block can be known before the clock starts, and nothing of it can run after it stops."""
    t0 = _perf_ns()
    peer.chan.send(request)
    reply = peer.chan.recv(peer.timeout)
    return reply, (_perf_ns() - t0) / 1000.0

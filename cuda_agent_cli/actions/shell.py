"""Bash, BashOutput and KillBash: shell commands in the sandbox, foreground or background.

Every command is its own process group (start_new_session) headed by bwrap, so a timeout or a
KillBash takes down the whole sandbox with one killpg: bwrap's --die-with-parent and pid
namespace end everything inside it.
"""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from cuda_agent_cli.actions.toolbox import ActionContext, ToolResult, error

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000


def _spawn(ctx: ActionContext, command: str) -> subprocess.Popen[bytes]:
    sb = ctx.sandbox
    return subprocess.Popen(
        sb.argv(command, ctx.root),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=sb.popen_env(),
        cwd=str(ctx.root),
        start_new_session=True,
        close_fds=True,
    )


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group the command leads; a no-op once it is gone."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _exit_note(code: int) -> str:
    if code == 125:
        return "exit code 125 (the sandbox could not apply its limits)"
    if code < 0:
        return (
            f"killed by signal {signal.Signals(-code).name}" if -code in signal.valid_signals() else f"exit code {code}"
        )
    if code > 128 and code - 128 in {int(s) for s in signal.valid_signals()}:
        try:
            return f"exit code {code} (killed by {signal.Signals(code - 128).name})"
        except ValueError:
            pass
    return f"exit code {code}"


KEEP_BYTES = 16 << 20  # of a foreground command's output: this much from each end


class HeadTail:
    """A foreground command's output, bounded: the first and last KEEP_BYTES are kept, so a
    command printing gigabytes cannot exhaust this process and the end (errors) survives."""

    def __init__(self, keep: int = KEEP_BYTES) -> None:
        self.keep = keep
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0
        self.lock = threading.Lock()

    def append(self, chunk: bytes) -> None:
        with self.lock:
            self._append(chunk)

    def _append(self, chunk: bytes) -> None:
        room = self.keep - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            excess = len(self.tail) - self.keep
            if excess > 0:
                del self.tail[:excess]
                self.dropped += excess

    def text(self) -> str:
        with self.lock:
            mid = f"\n[... {self.dropped} bytes of output dropped ...]\n".encode() if self.dropped else b""
            return bytes(self.head + mid + self.tail).decode("utf-8", "replace")


class Unread:
    """A background shell's output: only what the model has not read yet is kept, at most
    `limit` bytes of it (the oldest unread bytes go first, and the next read says so)."""

    def __init__(self, limit: int = 2 * KEEP_BYTES) -> None:
        self.limit = limit
        self.data = bytearray()
        self.skipped = 0
        self.lock = threading.Lock()

    def append(self, chunk: bytes) -> None:
        with self.lock:
            self.data += chunk
            excess = len(self.data) - self.limit
            if excess > 0:
                del self.data[:excess]
                self.skipped += excess

    def take(self) -> str:
        with self.lock:
            data, skipped = bytes(self.data), self.skipped
            self.data.clear()
            self.skipped = 0
        note = f"[... {skipped} bytes of output dropped before this read ...]\n" if skipped else ""
        return note + data.decode("utf-8", "replace")


def _pump(proc: subprocess.Popen[bytes], sink: Any) -> threading.Thread:
    """Copy the command's output into `sink` on a thread, until the pipe closes."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()

    def run() -> None:
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            sink.append(chunk)

    t = threading.Thread(target=run, name=f"output-{proc.pid}", daemon=True)
    t.start()
    return t


PIPE_GRACE_S = 2.0  # how long output may keep coming after the command itself has exited


def _read_until(proc: subprocess.Popen[bytes], out: HeadTail, deadline: float) -> bool:
    """Copy output until the pipe closes; False when the deadline came first.

    One thread, no helper: a reader thread costs milliseconds per call on a busy machine.
    Once the command has exited, a process that escaped it (possible only unconfined) may
    still hold the pipe; it gets PIPE_GRACE_S, not the whole timeout.
    """
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    grace_end: float | None = None
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            now = time.monotonic()
            limit = deadline if grace_end is None else min(deadline, grace_end)
            if now >= limit:
                return grace_end is not None and now >= grace_end and now < deadline
            if sel.select(min(limit - now, 0.25)):
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return True
                out.append(chunk)
            elif grace_end is None and proc.poll() is not None:
                grace_end = time.monotonic() + PIPE_GRACE_S


def run_foreground(ctx: ActionContext, command: str, timeout_s: float) -> tuple[str, int, bool, float]:
    """(output, exit code, timed out, seconds). On timeout the whole process group is killed."""
    proc = _spawn(ctx, command)
    started = time.monotonic()
    deadline = started + timeout_s
    out = HeadTail()
    timed_out = False
    try:
        if not _read_until(proc, out, deadline):
            timed_out = True
        else:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
        if timed_out:
            kill_group(proc)
            proc.wait()
            _read_until(proc, out, time.monotonic() + PIPE_GRACE_S)
    except BaseException:
        kill_group(proc)
        proc.wait()
        raise
    finally:
        if proc.stdout is not None:
            proc.stdout.close()
    return out.text(), proc.returncode, timed_out, time.monotonic() - started


@dataclass
class BackgroundShell:
    id: str
    command: str
    proc: subprocess.Popen[bytes]
    started: float = field(default_factory=time.monotonic)
    output: Unread = field(default_factory=Unread)
    killed: bool = False
    reader: threading.Thread | None = None

    def status(self) -> str:
        code = self.proc.poll()
        if code is None:
            return "running"
        if self.killed:
            return "killed"
        return "completed" if code == 0 else f"failed ({_exit_note(code)})"

    def take_new(self) -> str:
        return self.output.take()


class ShellManager:
    """Background shells of one session, with ids bash_1, bash_2, ..."""

    def __init__(self) -> None:
        self.shells: dict[str, BackgroundShell] = {}
        self._n = 0

    def start(self, ctx: ActionContext, command: str) -> BackgroundShell:
        self._n += 1
        shell = BackgroundShell(f"bash_{self._n}", command, _spawn(ctx, command))
        shell.reader = _pump(shell.proc, shell.output)
        self.shells[shell.id] = shell
        return shell

    def get(self, shell_id: str) -> BackgroundShell | None:
        return self.shells.get(shell_id)

    def kill(self, shell: BackgroundShell) -> None:
        shell.killed = shell.proc.poll() is None
        kill_group(shell.proc)
        try:
            shell.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def kill_all(self) -> None:
        for shell in self.shells.values():
            if shell.proc.poll() is None:
                self.kill(shell)

    def listing(self) -> str:
        return ", ".join(f"{s.id} ({s.status()})" for s in self.shells.values()) or "none"


def _shells(ctx: ActionContext) -> ShellManager:
    if ctx.shells is None:
        ctx.shells = ShellManager()
    return ctx.shells


class Bash:
    name = "Bash"
    writes = True
    runs_commands = True
    description = (
        "Executes a bash command in a sandbox and returns its combined stdout and stderr.\n\n"
        "The sandbox: the working directory is the workspace root; you may write only in the "
        "writable areas of the workspace (for kernel work: kernels/, model_new.py and scratch/) "
        "and in /tmp, which is private to each command and emptied afterwards. Everything else "
        "is read-only, locked files cannot be changed in any way, there is no network (pip "
        "install and downloads fail), and home directories are empty. Python with torch, g++, "
        "nvcc and the GPU (if the machine has one) are available.\n\n"
        "Usage:\n"
        "- Quote paths with spaces. Chain dependent commands with && and use absolute or "
        "workspace-relative paths instead of relying on cd between calls (each call is a fresh "
        "shell).\n"
        "- Prefer the Read, Grep and Glob tools over cat, grep and find, and Edit/Write over "
        "sed or echo redirection.\n"
        "- timeout is in milliseconds: default 120000 (2 minutes), maximum 600000 (10 minutes). "
        "A command that runs longer is killed together with everything it started.\n"
        "- run_in_background: true starts the command and returns a shell id at once; read its "
        "output with BashOutput and stop it with KillBash. Use it for long builds or servers.\n"
        "- Output longer than 30000 characters is cut in the middle; the full text is saved to "
        "a file you can Read.\n"
        "- A writable file that does not exist yet (e.g. model_new.py) must be created with "
        "Write first; after that the shell can change it too.\n"
        "- Compile, Verify and Profile are separate tools: the harness cannot be run from here."
    )
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command to execute"},
            "timeout": {
                "type": "number",
                "minimum": 1,
                "maximum": MAX_TIMEOUT_MS,
                "description": "Optional timeout in milliseconds (max 600000)",
            },
            "description": {
                "type": "string",
                "description": "Clear, concise description of what this command does in 5-10 words",
            },
            "run_in_background": {
                "type": "boolean",
                "description": "Set to true to run this command in the background; read its output with BashOutput",
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    }

    def run(self, args: dict[str, Any], ctx: ActionContext) -> ToolResult:
        command = args["command"]
        if not command.strip():
            return error("Bash: `command` is empty")
        if args.get("run_in_background"):
            shell = _shells(ctx).start(ctx, command)
            return ToolResult(
                f"Command running in the background with id {shell.id}. "
                f'Read its output with BashOutput(bash_id="{shell.id}"); stop it with '
                f'KillBash(shell_id="{shell.id}").',
                data={"bash_id": shell.id},
            )
        timeout_s = float(args.get("timeout", DEFAULT_TIMEOUT_MS)) / 1000.0
        text, code, timed_out, elapsed = run_foreground(ctx, command, timeout_s)
        data = {"exit_code": code, "timed_out": timed_out, "seconds": round(elapsed, 3)}
        if timed_out:
            tail = f"\n[command timed out after {timeout_s:g} s and was killed with everything it started]"
            return ToolResult(text + tail, True, data)
        if code != 0:
            return ToolResult(f"{text}\n[{_exit_note(code)}]".lstrip("\n"), True, data)
        return ToolResult(text if text else "(no output)", False, data)


class BashOutput:
    name = "BashOutput"
    writes = False
    runs_commands = False
    description = (
        "Retrieves output from a running or completed background shell started with "
        "Bash(run_in_background=true).\n\n"
        "- Returns only the output produced since the last BashOutput call for that shell, "
        "followed by the shell's status (running, completed, failed, killed).\n"
        "- filter: an optional regular expression; only matching lines are returned (the "
        "other lines of this chunk are discarded and will not be shown again).\n"
        "- Shell ids look like bash_1."
    )
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "bash_id": {"type": "string", "description": "The id of the background shell"},
            "filter": {"type": "string", "description": "Optional regular expression to filter output lines"},
        },
        "required": ["bash_id"],
        "additionalProperties": False,
    }

    def run(self, args: dict[str, Any], ctx: ActionContext) -> ToolResult:
        mgr = _shells(ctx)
        shell = mgr.get(args["bash_id"])
        if shell is None:
            return error(f"no background shell `{args['bash_id']}`; shells: {mgr.listing()}")
        pattern = re.compile(args["filter"]) if args.get("filter") else None
        # A finished shell's last bytes may still be in the pipe: let the reader catch up.
        if shell.proc.poll() is not None and shell.reader is not None:
            shell.reader.join(timeout=5)
        text = shell.take_new()
        if pattern is not None:
            text = "\n".join(ln for ln in text.splitlines() if pattern.search(ln))
        status = shell.status()
        data = {"bash_id": shell.id, "status": status, "exit_code": shell.proc.returncode}
        body = text if text else "(no new output)"
        return ToolResult(f"{body}\n[{shell.id}: {status}]", False, data)


class KillBash:
    name = "KillBash"
    writes = False
    runs_commands = False
    description = (
        "Kills a background shell started with Bash(run_in_background=true), together with "
        "every process it started. Use it for builds or servers you no longer need."
    )
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {"shell_id": {"type": "string", "description": "The id of the background shell to kill"}},
        "required": ["shell_id"],
        "additionalProperties": False,
    }

    def run(self, args: dict[str, Any], ctx: ActionContext) -> ToolResult:
        mgr = _shells(ctx)
        shell = mgr.get(args["shell_id"])
        if shell is None:
            return error(f"no background shell `{args['shell_id']}`; shells: {mgr.listing()}")
        if shell.proc.poll() is not None:
            return ToolResult(
                f"{shell.id} had already finished ({shell.status()})",
                data={"shell_id": shell.id, "status": shell.status()},
            )
        mgr.kill(shell)
        return ToolResult(
            f"Killed {shell.id} and every process it started", data={"shell_id": shell.id, "status": shell.status()}
        )

"""The host side of the worker zygote (tools/worker.py): start it clean, send jobs, read answers.

The zygote imports torch once; every job is a fresh process forked from it, so a warm round pays
neither the interpreter start nor the torch import. Each process-wide pool is keyed by the tools
directory and environment, so many Harness objects in one long-lived process share one zygote.
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from cuda_agent_cli.errors import EnvironmentMissing
from cuda_agent_cli.harness import wire

# Only these survive from the user's environment: no PYTHONPATH, LD_PRELOAD, API keys, proxies.
# LD_LIBRARY_PATH stays: on many clusters it is how the CUDA driver and libraries are found.
_KEEP_ENV = (
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TMPDIR",
    "TZ",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "TORCH_CUDA_ARCH_LIST",
    "XDG_CACHE_HOME",
    "LD_LIBRARY_PATH",
)
_SYSTEM_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


def clean_env(extra: Mapping[str, str] | None = None, source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment every harness process starts with."""
    source = os.environ if source is None else source
    env = {k: source[k] for k in _KEEP_ENV if k in source}
    path = [str(Path(sys.executable).parent)]
    nvcc = shutil.which("nvcc", path=source.get("PATH"))
    for home in (source.get("CUDA_HOME"), source.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and (Path(home) / "bin" / "nvcc").is_file():
            path.append(str(Path(home) / "bin"))
            break
    else:
        if nvcc:
            path.append(str(Path(nvcc).parent))
    # ninja may live only beside this interpreter's packages (pip --target, user installs).
    ninja = shutil.which("ninja", path=source.get("PATH"))
    if ninja:
        path.append(str(Path(ninja).parent))
    else:
        try:
            import ninja as ninja_pkg  # small: only locates the bundled binary

            path.append(str(ninja_pkg.BIN_DIR))
        except (ImportError, AttributeError):
            pass
    path += [p for p in _SYSTEM_PATH if p not in path]
    env["PATH"] = os.pathsep.join(path)
    # glibc moves its mmap threshold after the first large free, so whether a CPU temporary cost
    # fresh page faults on every call depended on each process's allocation history: eager
    # baselines came out 1x or 5x from one run to the next. Every timed process gets the same
    # allocator behaviour: the threshold where the moving one ends up (32 MB) and a heap that is
    # never trimmed, so what a call frees the next reuses without faulting its pages in again,
    # as in any process that has run a while. At 128 KB (the starting value) every output of a
    # 64x512 float32 op was a fresh mapping: relu read 70-100 us for 15-25 us of work, and the
    # harness's own work around each call doubled, and with it what its clock can resolve.
    env["MALLOC_MMAP_THRESHOLD_"] = str(32 << 20)
    env["MALLOC_TRIM_THRESHOLD_"] = str(1 << 40)
    env.update(extra or {})
    return env


@dataclass
class JobOutcome:
    """How a forked job ended; `result` is what it sent through the pipe the zygote made for it."""

    job: str
    status: str  # "ok" | "crash" | "timeout"
    result: dict[str, Any] | None
    log_tail: str = ""
    signal: int | None = None
    returncode: int | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.result is not None

    def describe_failure(self) -> str:
        if self.status == "timeout":
            return f"the {self.job} process ran past its time limit and was killed"
        if self.signal is not None:
            try:
                name = signal.Signals(self.signal).name
            except ValueError:
                name = f"signal {self.signal}"
            how = f"was killed by {name}"
        else:
            how = f"exited with status {self.returncode}"
        tail = self.log_tail.strip().splitlines()[-6:]
        return f"the {self.job} process {how}" + (": " + " | ".join(tail) if tail else "")


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


@dataclass
class Ticket:
    """A submitted job: what `WorkerPool.wait` needs to collect it."""

    id: int
    job: str
    log_path: Path
    timeout: float
    started: float
    generation: int
    lost: bool = False
    outcome: JobOutcome | None = None


@dataclass
class WorkerPool:
    tools_dir: Path
    env: dict[str, str]
    log_path: Path
    _proc: subprocess.Popen[bytes] | None = None
    _buffer: bytes = b""
    _ids: Any = field(default_factory=lambda: itertools.count(1))
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _answers: dict[Any, wire.WorkerAnswer] = field(default_factory=dict)
    # Bumped whenever the zygote is replaced: tickets of an older one can never be answered.
    _generation: int = 0
    probes: dict[str, dict[str, Any]] = field(default_factory=dict)
    # How the latest zygote start went: seconds, and its own import and warm-up times.
    boot: dict[str, Any] = field(default_factory=dict)

    def _start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-E", "-B", "-P", str(self.tools_dir / "worker.py")],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=self.env,
                cwd=str(self.log_path.parent),
                start_new_session=True,
            )
        finally:
            log.close()
        self._buffer = b""
        began = time.perf_counter()
        ready = self._readline(timeout=300)
        self.boot = {**(json.loads(ready) if ready else {}), "seconds": round(time.perf_counter() - began, 3)}
        if ready is None or not self.boot.get("ready"):
            self.close()
            raise EnvironmentMissing(
                "the harness worker could not start (torch failed to import in a clean environment)",
                f"see {self.log_path}",
            )

    def _readline(self, timeout: float) -> str | None:
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    return None
                chunk = os.read(fd, 65536)
                if not chunk:
                    return None
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()

    def run(self, job: str, spec: Mapping[str, Any], job_dir: Path, timeout: float) -> JobOutcome:
        """Run one job in a fresh forked process; never raises for what the job itself does."""
        return self.wait(self.submit(job, spec, job_dir, timeout))

    def submit(
        self,
        job: str,
        spec: Mapping[str, Any],
        job_dir: Path,
        timeout: float,
        nice: int = 0,
        service: wire.ServiceRequest | None = None,
    ) -> "Ticket":
        """Start a job and return at once; `wait(ticket)` collects it. Jobs may overlap; `nice`
        lowers the job's CPU priority (for work that runs beside a build); `service` asks the
        worker to lend an evaluation the baselines service of that key (tools/worker.py). `job`
        is a name in the worker's table (tools/wire.py, JOBS); any other is refused here, before
        anything is written or sent."""
        if job not in wire.JOBS:
            raise ValueError(f"unknown job {job!r}: the harness worker runs {', '.join(wire.JOBS)}")
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._start()
            job_dir.mkdir(parents=True, exist_ok=True)
            spec_path, log_path = job_dir / "spec.json", job_dir / "log.txt"
            spec_path.write_text(json.dumps(spec))
            req_id = next(self._ids)
            request: wire.WorkerRequest = {
                "id": req_id,
                "job": job,
                "spec": str(spec_path),
                "log": str(log_path),
                "timeout": timeout,
                "nice": int(nice),
            }
            if service:
                request["service"] = service
            ticket = Ticket(req_id, job, log_path, timeout, time.perf_counter(), self._generation)
            assert self._proc is not None and self._proc.stdin is not None
            try:
                self._proc.stdin.write((json.dumps(request) + "\n").encode())
                self._proc.stdin.flush()
            except (BrokenPipeError, OSError):
                ticket.lost = True
            return ticket

    def wait(self, ticket: "Ticket") -> JobOutcome:
        """The outcome of a submitted job, once it has ended (the same object when asked again)."""
        if ticket.outcome is not None:
            return ticket.outcome
        ticket.outcome = self._collect(ticket)
        return ticket.outcome

    def _collect(self, ticket: "Ticket") -> JobOutcome:
        with self._lock:
            answer = self._answers.pop(ticket.id, None)
            if answer is None and not ticket.lost and ticket.generation == self._generation:
                try:
                    answer = self._read_answer(ticket)
                except BaseException:
                    # Interrupted mid-job: the zygote's state is unknown, so it is replaced.
                    self.close()
                    raise
            seconds = time.perf_counter() - ticket.started
            if answer is None:
                # The zygote itself is gone or stuck: it is replaced on the next job.
                self.close()
                return JobOutcome(ticket.job, "crash", None, _tail(ticket.log_path), seconds=seconds)
            result = answer.get("result") if answer["status"] == "ok" else None
            if result is not None and not isinstance(result, dict):
                result = None
            status = answer["status"] if result is not None or answer["status"] != "ok" else "crash"
            return JobOutcome(
                ticket.job,
                status,
                result,
                _tail(ticket.log_path),
                answer.get("signal"),
                answer.get("returncode"),
                seconds,
            )

    def _read_answer(self, ticket: "Ticket") -> wire.WorkerAnswer | None:
        # Answers to other submitted jobs are kept for their own wait(); an answer to an
        # abandoned request (e.g. after Ctrl-C) is never collected and does no harm.
        deadline = ticket.started + ticket.timeout + 60
        while True:
            try:
                line = self._readline(max(1.0, deadline - time.perf_counter()))
            except OSError:
                return None
            if line is None:
                return None
            answer: wire.WorkerAnswer = json.loads(line)
            if answer.get("id") == ticket.id:
                return answer
            self._answers[answer.get("id")] = answer

    def probe(self, device: str, scratch: Path) -> dict[str, Any]:
        """Torch version and, for cuda, the GPU, as a forked worker sees them (cached)."""
        if device not in self.probes:
            outcome = self.run("probe", {"device": device}, scratch / f"probe-{device}", timeout=120)
            if not outcome.ok:
                raise EnvironmentMissing("the harness worker could not inspect torch", outcome.describe_failure())
            self.probes[device] = outcome.result or {}
        return self.probes[device]

    def close(self) -> None:
        proc, self._proc = self._proc, None
        self._generation += 1
        self._answers.clear()
        if proc is None:
            return
        try:
            if proc.stdin:
                proc.stdin.close()
            proc.wait(timeout=5)
        except (subprocess.TimeoutExpired, OSError):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
        finally:
            if proc.stdout:
                proc.stdout.close()


_POOLS: dict[tuple[str, tuple[tuple[str, str], ...]], WorkerPool] = {}
_POOLS_LOCK = threading.Lock()


def shared_pool(tools_dir: Path, env: dict[str, str], log_path: Path) -> WorkerPool:
    """One zygote per (tools, environment) in this process, closed at exit."""
    key = (str(tools_dir), tuple(sorted(env.items())))
    with _POOLS_LOCK:
        pool = _POOLS.get(key)
        if pool is None:
            pool = WorkerPool(tools_dir, env, log_path)
            _POOLS[key] = pool
        return pool


@atexit.register
def _close_pools() -> None:
    for pool in list(_POOLS.values()):
        pool.close()

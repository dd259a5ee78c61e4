"""Scheduling: the local pool of slots (one per GPU, or CPU slots) and Ray, one interface.

`run_jobs(jobs, on_record)` calls `on_record(job, record)` in the caller's thread as each task
finishes, in finishing order; tasks start longest expected first (order.py). A slot runs one
task at a time, so timing is never shared between two tasks on one GPU. A slot process that dies mid-task is restarted and the task tried once more.
Compile-ahead workers (harness-only mode) build queued tasks' candidates on the CPU meanwhile,
so a slot's GPU time goes to timing rather than to waiting on nvcc.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Sequence

from cuda_agent_cli.errors import BadInput, EnvironmentMissing
from cuda_agent_cli.machine import all_gpus

OnRecord = Callable[[dict[str, Any], dict[str, Any]], None]
ATTEMPTS = 2  # a task whose worker died is tried once more


def visible_gpus() -> list[str]:
    """GPU indices this machine shows (nvidia-smi), without importing torch or initializing CUDA."""
    return [str(g.index) for g in all_gpus()]


def parse_gpus(spec: str | None, device: str) -> list[str | None]:
    """--gpus all|0,1,... -> one slot per GPU; on the CPU, one slot with no GPU."""
    if device == "cpu":
        return [None]
    spec = (spec or "all").strip()
    present = visible_gpus()
    if spec == "all":
        if not present:
            raise EnvironmentMissing(
                "--device cuda, but nvidia-smi shows no GPU here",
                "run on a machine with an NVIDIA GPU, or pass --device cpu",
            )
        return list(present)
    wanted = [g.strip() for g in spec.split(",") if g.strip()]
    if not wanted or not all(g.isdigit() for g in wanted):
        raise BadInput(f"--gpus {spec!r} is not a list of GPU indices", "use --gpus all or --gpus 0,1")
    missing = [g for g in wanted if present and g not in present]
    if missing:
        raise BadInput(f"GPU {', '.join(missing)} is not on this machine", f"GPUs present: {', '.join(present)}")
    return list(dict.fromkeys(wanted))


SLOT_COMMAND = (sys.executable, "-m", "cuda_agent_cli.bench.slot")
BUILD_NICE = 10  # compile-ahead workers yield the cores to the slots' timing processes


class _Slot:
    """One long-lived slot process. `gpu` is what it sees: an index, "" for no GPU at all, or
    None for the environment as it is (a CPU slot)."""

    def __init__(
        self,
        gpu: str | None,
        log: Path,
        command: Sequence[str] = SLOT_COMMAND,
        nice: int = 0,
        env: dict[str, str] | None = None,
    ) -> None:
        self.gpu, self.log, self.command, self.nice = gpu, log, list(command), nice
        self.env = env or {}
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        env = {**os.environ, **self.env}
        if self.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.gpu
            # Indices as nvidia-smi numbers them (what --gpus takes), not CUDA's fastest-first order.
            env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        command = ["nice", "-n", str(self.nice), *self.command] if self.nice and shutil.which("nice") else self.command
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "a") as log:  # the child keeps its own copy of the descriptor
            self.proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env=env,
                start_new_session=True,
            )

    def run(self, job: dict[str, Any]) -> dict[str, Any] | None:
        """The record, or None when the slot process died before answering."""
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        assert self.proc and self.proc.stdin and self.proc.stdout
        try:
            self.proc.stdin.write(json.dumps(job) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            self.stop()
            return None
        return json.loads(line)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the slot and the harness processes it started
            except (ProcessLookupError, PermissionError):
                proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            try:
                stream and stream.close()
            except OSError:
                pass


def died_record(job: dict[str, Any]) -> dict[str, Any]:
    from cuda_agent_cli.bench.task_run import _base_record

    rec = _base_record(job)
    rec.update(
        status="error", error=f"the worker process died while running this task ({ATTEMPTS} attempts)", wall_s=None
    )
    return rec


class _Board:
    """Where each job of a run is: waiting to be built ahead, being built, ready, or taken by a
    slot. Slots take ready jobs first (built ahead, or nothing to build), then unbuilt ones (they
    build those themselves), and wait only when every job left is being built. Builders build
    only while every slot is busy: a job an idle slot would take at once gains nothing from it."""

    def __init__(self, jobs: Sequence[dict[str, Any]], slots: int, build: Callable[[dict[str, Any]], bool]) -> None:
        self.jobs = list(jobs)
        self.state = ["queued" if build(j) else "ready" for j in self.jobs]
        self.ahead: list[dict[str, Any] | None] = [None] * len(self.jobs)
        self.slots, self.busy = slots, 0
        self.stopped = False
        self.cond = threading.Condition()

    def _first(self, *states: str) -> int | None:
        return next((i for i, st in enumerate(self.state) if st in states), None)

    def take(self) -> int | None:
        """The next job for a slot (None: nothing left); counts the slot busy until release()."""
        with self.cond:
            while not self.stopped:
                i = self._first("ready")
                i = self._first("queued") if i is None else i
                if i is not None:
                    self.state[i] = "taken"
                    self.busy += 1
                    return i
                if self._first("building") is None:
                    return None
                self.cond.wait(0.5)
            return None

    def release(self) -> None:
        with self.cond:
            self.busy -= 1
            self.cond.notify_all()

    def next_build(self) -> int | None:
        """The next job for a builder (None: nothing left to build ahead)."""
        with self.cond:
            while not self.stopped:
                i = self._first("queued")
                if i is None:
                    return None
                if self.busy >= self.slots:
                    self.state[i] = "building"
                    return i
                self.cond.wait(0.5)
            return None

    def built(self, i: int, info: dict[str, Any] | None) -> None:
        with self.cond:
            self.ahead[i] = info
            if self.state[i] == "building":
                self.state[i] = "ready"
            self.cond.notify_all()

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            self.cond.notify_all()


class LocalPool:
    """One slot process per GPU (or one CPU slot); a queue of tasks feeds them. With `builders`,
    that many compile-ahead processes (niced, on the CPU) build queued tasks' candidates while
    the slots time: they see `build_gpu` ("" for none), since a cuda harness needs a GPU in
    view to start even when it only builds."""

    def __init__(
        self,
        gpus: Sequence[str | None],
        log_dir: Path,
        command: Sequence[str] = SLOT_COMMAND,
        builders: int = 0,
        build_gpu: str = "",
    ) -> None:
        self.slots = [
            _Slot(g, log_dir / f"slot-{g if g is not None else 'cpu'}-{i}.log", command) for i, g in enumerate(gpus)
        ]
        # The builders share the cores the slots leave: each one's ninja runs that share of compilers
        # (unless the user set MAX_JOBS).
        build_env = {} if "MAX_JOBS" in os.environ else {"MAX_JOBS": str(build_jobs(builders, len(gpus)))}
        self.builders = [
            _Slot(build_gpu, log_dir / f"build-{i}.log", command, nice=BUILD_NICE, env=build_env)
            for i in range(builders)
        ]
        self.busy = 0

    def run_jobs(self, jobs: Sequence[dict[str, Any]], on_record: OnRecord) -> None:
        from cuda_agent_cli.bench.order import longest_first
        from cuda_agent_cli.bench.prebuild import buildable

        board = _Board(longest_first(jobs), len(self.slots), lambda j: bool(self.builders and buildable(j)))
        done: queue.Queue[tuple[dict[str, Any], dict[str, Any] | BaseException]] = queue.Queue()
        lock = threading.Lock()

        def serve(slot: _Slot) -> None:
            while True:
                i = board.take()
                if i is None:
                    return
                job = board.jobs[i]
                job["gpu"] = slot.gpu  # the record says which GPU scored the task
                with lock:
                    self.busy += 1
                try:
                    record = None
                    for _ in range(ATTEMPTS):
                        record = slot.run(job)
                        if record is not None or board.stopped:
                            break
                    record = record if record is not None else died_record(job)
                    if board.ahead[i] is not None and "fatal" not in record:
                        record["compile_ahead"] = board.ahead[i]
                    done.put((job, record))
                except BaseException as exc:  # reported in the caller's thread
                    done.put((job, exc))
                finally:
                    with lock:
                        self.busy -= 1
                    board.release()

        def build(builder: _Slot) -> None:
            while True:
                i = board.next_build()
                if i is None:
                    return
                info = None
                try:
                    answer = builder.run({**board.jobs[i], "stage": "prebuild"})
                    info = (answer or {}).get("compile_ahead") or {"error": "the compile-ahead worker died"}
                finally:
                    board.built(i, info)

        threads = [threading.Thread(target=serve, args=(s,), daemon=True) for s in self.slots]
        threads += [threading.Thread(target=build, args=(b,), daemon=True) for b in self.builders]
        for t in threads:
            t.start()
        try:
            for _ in range(len(jobs)):
                while True:
                    try:
                        job, record = done.get(timeout=0.2)
                        break
                    except queue.Empty:
                        if not any(t.is_alive() for t in threads) and done.empty():
                            return
                if isinstance(record, BaseException):
                    raise record
                on_record(job, record)
                if "fatal" in record:
                    return
        finally:
            board.stop()
            for s in [*self.slots, *self.builders]:
                s.stop()


BUILD_CORES = 2  # an extension's build runs about two compilers at once (the host C++ and nvcc)
BUILD_MEMORY_GIB = 4  # an nvcc build against torch's headers peaks near 2 GiB a compiler
SLOT_CORES = 2  # kept for each slot's timing process and its baselines' process


def default_builders(
    device: str,
    slots: int,
    jobs: Sequence[dict[str, Any]],
    cores: int | None = None,
    memory_gib: float | None = None,
) -> int:
    """Compile-ahead workers for a run: on a GPU, as many as the cores left beside the slots'
    timing processes and the memory allow, and no more than there are jobs to build (a build
    takes far longer than a timing round, so one builder per slot leaves the GPU waiting on
    nvcc); none on the CPU, where a build beside the timing would take cores from the very
    thing being timed; none when no job has anything to build."""
    from cuda_agent_cli.bench.prebuild import buildable
    from cuda_agent_cli.machine import memory_gib as machine_memory

    wanted = sum(1 for j in jobs if buildable(j))
    if device != "cuda" or not wanted:
        return 0
    cores = cores or os.cpu_count() or 1
    memory = memory_gib if memory_gib is not None else machine_memory()
    by_cores = (cores - SLOT_CORES * slots) // BUILD_CORES
    by_memory = int(memory // BUILD_MEMORY_GIB) if memory else by_cores
    return max(1, min(by_cores, by_memory, wanted))


def build_jobs(builders: int, slots: int, cores: int | None = None) -> int:
    """Compiler processes each builder's ninja may run (MAX_JOBS), so that the builders together
    use the cores the slots leave."""
    cores = cores or os.cpu_count() or 1
    return max(1, (cores - SLOT_CORES * slots) // max(1, builders))

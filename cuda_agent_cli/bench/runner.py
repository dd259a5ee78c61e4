"""Scheduling: the local pool of slots (one per GPU, or CPU slots) and Ray, one interface.

`run_jobs(jobs, on_record)` calls `on_record(job, record)` in the caller's thread as each task
finishes, in finishing order. A slot runs one task at a time, so timing is never shared between
two tasks on one GPU. A slot process that dies mid-task is restarted and the task tried once more.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Sequence

from cuda_agent_cli.errors import BadInput, EnvironmentMissing

OnRecord = Callable[[dict[str, Any], dict[str, Any]], None]
ATTEMPTS = 2  # a task whose worker died is tried once more


def visible_gpus() -> list[str]:
    """GPU indices this machine shows (nvidia-smi), without importing torch or initializing CUDA."""
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    if out.returncode != 0:
        return []
    return [str(i) for i, line in enumerate(out.stdout.splitlines()) if line.startswith("GPU ")]


def parse_gpus(spec: str | None, device: str) -> list[str | None]:
    """--gpus all|0,1,... -> one slot per GPU; on the CPU, one slot with no GPU."""
    if device == "cpu":
        return [None]
    spec = (spec or "all").strip()
    present = visible_gpus()
    if spec == "all":
        if not present:
            raise EnvironmentMissing("--device cuda, but nvidia-smi shows no GPU here",
                                     "run on a machine with an NVIDIA GPU, or pass --device cpu")
        return list(present)
    wanted = [g.strip() for g in spec.split(",") if g.strip()]
    if not wanted or not all(g.isdigit() for g in wanted):
        raise BadInput(f"--gpus {spec!r} is not a list of GPU indices", "use --gpus all or --gpus 0,1")
    missing = [g for g in wanted if present and g not in present]
    if missing:
        raise BadInput(f"GPU {', '.join(missing)} is not on this machine", f"GPUs present: {', '.join(present)}")
    return list(dict.fromkeys(wanted))


SLOT_COMMAND = (sys.executable, "-m", "cuda_agent_cli.bench.slot")


class _Slot:
    def __init__(self, gpu: str | None, log: Path, command: Sequence[str] = SLOT_COMMAND) -> None:
        self.gpu, self.log, self.command = gpu, log, list(command)
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        env = dict(os.environ)
        if self.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.gpu
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "a") as log:  # the child keeps its own copy of the descriptor
            self.proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                         text=True, env=env, start_new_session=True)

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
    rec.update(status="error", error=f"the worker process died while running this task ({ATTEMPTS} attempts)",
               wall_s=None)
    return rec


class LocalPool:
    """One slot process per GPU (or one CPU slot); a queue of tasks feeds them."""

    def __init__(self, gpus: Sequence[str | None], log_dir: Path, command: Sequence[str] = SLOT_COMMAND) -> None:
        self.slots = [_Slot(g, log_dir / f"slot-{g if g is not None else 'cpu'}-{i}.log", command)
                      for i, g in enumerate(gpus)]
        self.busy = 0

    def run_jobs(self, jobs: Sequence[dict[str, Any]], on_record: OnRecord) -> None:
        todo: queue.Queue[dict[str, Any]] = queue.Queue()
        for job in jobs:
            todo.put(job)
        done: queue.Queue[tuple[dict[str, Any], dict[str, Any] | BaseException]] = queue.Queue()
        stop = threading.Event()
        lock = threading.Lock()

        def serve(slot: _Slot) -> None:
            while not stop.is_set():
                try:
                    job = todo.get_nowait()
                except queue.Empty:
                    return
                with lock:
                    self.busy += 1
                try:
                    record = None
                    for _ in range(ATTEMPTS):
                        record = slot.run(job)
                        if record is not None or stop.is_set():
                            break
                    done.put((job, record if record is not None else died_record(job)))
                except BaseException as exc:  # reported in the caller's thread
                    done.put((job, exc))
                finally:
                    with lock:
                        self.busy -= 1

        threads = [threading.Thread(target=serve, args=(s,), daemon=True) for s in self.slots]
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
            stop.set()
            for s in self.slots:
                s.stop()

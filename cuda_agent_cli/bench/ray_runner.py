"""`--ray auto|ADDRESS`: one Ray actor per GPU runs the tasks one at a time, records streamed as
they finish.

Ray is an optional extra (`pip install 'cuda-agent[ray]'`) imported only here. Each actor holds
one GPU (`num_gpus`) for the whole run, like a local slot process: its interpreter, its imports
and the harness's worker (torch imported once) stay warm from one task to the next, where a Ray
task per bench task paid a new worker process, the bench's imports and a harness worker start
every time (Ray gives each GPU task a fresh worker). The task body is the same `run_task` the
local slots run, so verdicts do not depend on the scheduler. A task whose actor died (a system
failure) is run again on a new actor, up to RETRIES times; a task that failed on its own merits
is not.
"""

from __future__ import annotations

import os
import socket
from collections import deque
from typing import Any, Callable, Sequence

from cuda_agent_cli.errors import EnvironmentMissing

RETRIES = 2


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise EnvironmentMissing("--ray needs Ray, which is not installed", "pip install 'cuda-agent[ray]'") from None
    return ray


def reachable(address: str, timeout: float = 5.0) -> None:
    """Fail in seconds, not minutes, for an address nothing listens on (ray.init keeps retrying)."""
    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    default = 10001 if address.startswith("ray://") else 6379
    host, port_no = (host, int(port)) if port.isdigit() else (hostport, default)
    try:
        socket.create_connection((host or "127.0.0.1", port_no), timeout=timeout).close()
    except OSError as exc:
        raise EnvironmentMissing(
            f"cannot reach the Ray cluster at {address}: {exc.strerror or exc}",
            "start one with `ray start --head`, or pass its address to --ray",
        ) from None


def _bench_task(job: dict[str, Any]) -> dict[str, Any]:
    from cuda_agent_cli.bench.task_run import run_task

    # Ray set CUDA_VISIBLE_DEVICES to the GPU it gave this actor; the record says which one.
    job.setdefault("gpu", os.environ.get("CUDA_VISIBLE_DEVICES") or None)
    return run_task(job)


class _GpuSlot:
    """The body of one Ray actor: one GPU's worker for a whole run, one task at a time."""

    def __init__(self, task: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self.task = task

    def gpu(self) -> str | None:
        """The GPU Ray gave this actor (answered once it has started: it is then ready for work)."""
        return os.environ.get("CUDA_VISIBLE_DEVICES") or None

    def run(self, job: dict[str, Any]) -> dict[str, Any]:
        return self.task(job)


class RayPool:
    """Connects on first use: to `address` ("auto": the cluster this machine belongs to), or to
    the Ray instance this process already started (tests: ray.init(num_cpus=2, num_gpus=2))."""

    def __init__(
        self,
        address: str | None = "auto",
        num_gpus: float = 1.0,
        task: Callable[[dict[str, Any]], dict[str, Any]] = _bench_task,
    ) -> None:
        self.address = address
        self.num_gpus = num_gpus
        # What each actor runs on a job: `_bench_task`, or a wrapper of it (tests make one that
        # kills its process, to see a dead actor's task run again on a new one).
        self.task = task
        self.busy = 0

    def connect(self) -> Any:
        ray = _ray()
        if not ray.is_initialized():
            if self.address and self.address != "auto":
                reachable(self.address)
            try:
                ray.init(address=self.address, log_to_driver=False)
            except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ValueError by version
                first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
                raise EnvironmentMissing(
                    f"cannot reach the Ray cluster at {self.address}: {first}",
                    "start one with `ray start --head`, or pass its address to --ray",
                ) from None
        return ray

    def run_jobs(self, jobs: Sequence[dict[str, Any]], on_record: Any) -> None:
        from cuda_agent_cli.bench.order import longest_first

        ray = self.connect()
        gpus = ray.cluster_resources().get("GPU", 0)
        if gpus < self.num_gpus:
            # Actors asking for a GPU would wait forever on a cluster that has none.
            raise EnvironmentMissing(
                "the Ray cluster has no GPU to give each task",
                "start the Ray nodes on GPU machines (ray start --num-gpus=N)",
            )
        slot_class = ray.remote(num_gpus=self.num_gpus, max_restarts=0, max_task_retries=0)(_GpuSlot)
        order = longest_first(jobs)
        todo = deque(range(len(order)))
        deaths = [0] * len(order)
        starting: dict[Any, Any] = {}  # an actor's first answer -> the actor
        running: dict[Any, tuple[Any, int]] = {}  # a task's answer -> (its actor, its job)
        idle: list[Any] = []
        lost_starts = 0  # actors that died before they answered: the cluster's trouble, not a task's

        def new_slot() -> None:
            actor = slot_class.remote(self.task)
            starting[actor.gpu.remote()] = actor

        for _ in range(max(1, min(len(order), int(gpus / self.num_gpus)))):
            new_slot()
        try:
            while todo or running:
                # Work goes only to actors that have answered: one that Ray cannot place yet
                # (its GPU held by other work) holds no job back from those that run.
                while idle and todo:
                    actor, i = idle.pop(), todo.popleft()
                    running[actor.run.remote(order[i])] = (actor, i)
                self.busy = len(running)
                if not running and not starting:
                    raise EnvironmentMissing(
                        f"the Ray workers kept dying as they started ({lost_starts} times)",
                        "see the cluster's Ray logs (/tmp/ray/session_latest/logs on each node)",
                    )
                ref = ray.wait([*running, *starting], num_returns=1)[0][0]
                if ref in starting:
                    actor = starting.pop(ref)
                    try:
                        ray.get(ref)
                        idle.append(actor)
                    except Exception:
                        lost_starts += 1
                        if lost_starts <= RETRIES:
                            new_slot()
                    continue
                actor, i = running.pop(ref)
                try:
                    record = ray.get(ref)
                    idle.append(actor)
                except Exception as exc:
                    died = worker_died(ray, exc)
                    if not died:
                        idle.append(actor)  # the task raised; its actor is fine
                    else:
                        ray.kill(actor)
                        new_slot()
                        deaths[i] += 1
                        if deaths[i] <= RETRIES:
                            todo.appendleft(i)  # again, on the next actor that is ready
                            continue
                    record = failed_record(order[i], exc, died)
                on_record(order[i], record)
                if "fatal" in record:
                    return
        finally:
            self.busy = 0
            for actor in [*(a for a, _ in running.values()), *starting.values()]:
                ray.kill(actor)
            for actor in idle:
                actor.__ray_terminate__.remote()  # graceful: its exit handlers close its harness worker


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:200]


def worker_died(ray: Any, exc: BaseException) -> bool:
    """Whether a task ended because its actor's process (or node) died, not because the task
    raised: only those are run again, so only those have used up the retries."""
    kinds = tuple(
        k
        for k in (
            getattr(ray.exceptions, n, None)
            for n in (
                "RayActorError",
                "WorkerCrashedError",
                "NodeDiedError",
                "LocalRayletDiedError",
                "OutOfMemoryError",
            )
        )
        if isinstance(k, type)
    )
    return isinstance(exc, kinds)


def failed_record(job: dict[str, Any], exc: BaseException, died: bool) -> dict[str, Any]:
    from cuda_agent_cli.bench.local_pool import died_record

    record = died_record(job)
    first = _first_line(exc)
    record["error"] = (
        f"the Ray worker died while running this task ({RETRIES + 1} attempts): {type(exc).__name__}"
        if died
        else f"the Ray task failed: {type(exc).__name__}: {first}"
    )
    return record

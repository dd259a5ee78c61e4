"""`--ray auto|ADDRESS`: each task a Ray task with one GPU, records streamed as they finish.

Ray is an optional extra (`pip install 'cuda-agent[ray]'`) imported only here. The task body is
the same `run_task` the local slots run, so verdicts do not depend on the scheduler. A task whose
worker died (a system failure) is retried by Ray; a task that failed on its own merits is not.
"""

from __future__ import annotations

import os
import socket
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

    # Ray set CUDA_VISIBLE_DEVICES to the GPU it gave this task; the record says which one.
    job.setdefault("gpu", os.environ.get("CUDA_VISIBLE_DEVICES") or None)
    return run_task(job)


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
        # What each Ray task runs on its job: `_bench_task`, or a wrapper of it (tests make one
        # that kills its worker, to see Ray's retry of a dead worker at work).
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
        ray = self.connect()
        if ray.cluster_resources().get("GPU", 0) < self.num_gpus:
            # Tasks asking for a GPU would wait forever on a cluster that has none.
            raise EnvironmentMissing(
                "the Ray cluster has no GPU to give each task",
                "start the Ray nodes on GPU machines (ray start --num-gpus=N)",
            )
        remote = ray.remote(num_gpus=self.num_gpus, max_retries=RETRIES, retry_exceptions=False)(self.task)
        pending = {remote.remote(job): job for job in jobs}
        gpus = max(1, int(ray.cluster_resources().get("GPU", 0) / self.num_gpus))
        try:
            while pending:
                self.busy = min(len(pending), gpus)
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    job = pending.pop(ref)
                    try:
                        record = ray.get(ref)
                    except Exception as exc:
                        record = failed_record(job, exc, worker_died(ray, exc))
                    on_record(job, record)
                    if "fatal" in record:
                        return
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)


def worker_died(ray: Any, exc: BaseException) -> bool:
    """Whether Ray gave up on a task because its worker (or node) kept dying, not because the
    task raised: only those are retried, so only those have used up the retries."""
    kinds = tuple(
        k
        for k in (
            getattr(ray.exceptions, n, None)
            for n in ("WorkerCrashedError", "NodeDiedError", "LocalRayletDiedError", "OutOfMemoryError")
        )
        if isinstance(k, type)
    )
    return isinstance(exc, kinds)


def failed_record(job: dict[str, Any], exc: BaseException, died: bool) -> dict[str, Any]:
    from cuda_agent_cli.bench.runner import died_record

    record = died_record(job)
    first = (str(exc).strip().splitlines() or [""])[0][:200]
    record["error"] = (
        f"the Ray worker died while running this task ({RETRIES + 1} attempts): {type(exc).__name__}"
        if died
        else f"the Ray task failed: {type(exc).__name__}: {first}"
    )
    return record

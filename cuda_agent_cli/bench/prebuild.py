"""Compile-ahead: the extensions of a queued task's candidates built on a CPU worker, so that the
GPU slot that scores the task later finds them built and spends its GPU time timing.

Only CUDA-Agent workdir candidates (kernels/ and the binding files) build apart from a round:
`Harness.compile()` builds them into the candidate folder's build directory, which the slot's
later `profile()` of the same folder reuses. A KernelBench single-file candidate builds itself
with `load_inline` when the harness imports it to verify, so there is nothing to build ahead.
"""

from __future__ import annotations

import time
from typing import Any

from cuda_agent_cli.errors import CudaAgentError


def buildable(job: dict[str, Any]) -> list[dict[str, Any]]:
    """The job's samples that build ahead: harness-only mode, a task that loaded, kernels/ files."""
    if job.get("mode") != "solutions" or job["task"].get("error"):
        return []
    return [s for s in job.get("samples") or [] if any(rel.startswith("kernels/") for rel in s.get("files", {}))]


def prebuild(job: dict[str, Any]) -> dict[str, Any]:
    """Build every buildable sample of the job; what happened, with wall-clock start and end
    (epoch seconds, comparable across processes). A failure here is no verdict: the slot's own
    round builds again and reports the compiler's errors there."""
    from cuda_agent_cli.bench.solutions import sample_files
    from cuda_agent_cli.bench.task_run import materialize, sample_folder
    from cuda_agent_cli.harness import Harness
    from cuda_agent_cli.workspace import external_workspace

    started = time.time()
    built: list[dict[str, Any]] = []
    error = None
    try:
        for s in buildable(job):
            folder = materialize(sample_folder(job, s), job["task"]["source"], sample_files(s))
            result = Harness(
                external_workspace(folder), device=job.get("device"), policy=job.get("policy") or "strict"
            ).compile()
            built.append(
                {
                    "sample": int(s["index"]),
                    "compiled": bool(result.compiled),
                    "seconds": round(float(result.stage_seconds.get("compile") or 0.0), 3),
                }
            )
    except CudaAgentError as exc:
        error = exc.one_line()
    except Exception as exc:  # the slot's round will say what is wrong with the candidate
        error = f"{type(exc).__name__}: {exc}"
    return {
        "task": job["task"]["key"],
        "compile_ahead": {"start": started, "end": time.time(), "samples": built, "error": error},
    }

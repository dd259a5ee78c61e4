"""Compile-ahead: the extensions of a queued task's candidates built on a CPU worker, so that the
GPU slot that scores the task later finds them built and spends its GPU time timing.

`Harness.compile()` builds a candidate into its folder's build directory, which the slot's later
`profile()` of the same folder reuses: a CUDA-Agent workdir (kernels/ and the binding files)
through the harness's ninja build, a KernelBench single-file candidate by importing its
model_new.py alone, confined as the candidate's process is, so that its `load_inline` builds
the extension into the folder the round loads it from.
"""

from __future__ import annotations

import time
from typing import Any

from cuda_agent_cli.errors import CudaAgentError


def buildable(job: dict[str, Any]) -> list[dict[str, Any]]:
    """The job's samples that build ahead: harness-only mode, a task that loaded, kernels/ files
    or a single model_new.py that builds its extension with load_inline (its import, confined,
    builds it where the slot's round loads it from)."""
    if job.get("mode") != "solutions" or job["task"].get("error"):
        return []

    from cuda_agent_cli.bench.solutions import sample_files

    def builds(sample: dict[str, Any]) -> bool:
        files = sample.get("files", {})
        if any(rel.startswith("kernels/") for rel in files):
            return True
        return "model_new.py" in files and b"load_inline" in sample_files(sample).get("model_new.py", b"")

    return [s for s in job.get("samples") or [] if builds(s)]


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

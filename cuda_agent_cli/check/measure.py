"""The full half of `check`: verify and profile an integrated kernel through the harness, as it is
in the repository now, against the reference as it is now, on the inputs it was verified on.

The kernel's files are copied into a fresh session workspace (the harness never builds inside
the user's repository) and judged exactly like a candidate of an optimize session.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cuda_agent_cli.config import Policy
from cuda_agent_cli.errors import CudaAgentError, EnvironmentMissing
from cuda_agent_cli.kernel_files import KernelFiles

if TYPE_CHECKING:
    from cuda_agent_cli.harness_result import HarnessResult


@dataclass
class Measurement:
    result: HarnessResult | None = None  # the profile
    not_measured: str | None = None  # why it could not run here
    error: str | None = None  # the target or its inputs could not be loaded
    seconds: float = 0.0


def _reference_task(root: Path, entry: dict[str, Any]) -> Any:
    """The Task for the kernel's target, on its recorded inputs, with the reference being the
    module as the user wrote it (the lines that apply the kernel left out).

    Where the module is unchanged since the session (its hash before the patch is recorded) and
    the session copied it into model.py, the same copy is made, so the reference is byte for byte
    the session's and its cached eager/torch.compile baselines are reused."""
    import hashlib

    from cuda_agent_cli.task.inputs import call_from_json
    from cuda_agent_cli.task.reference import reference_source
    from cuda_agent_cli.task.resolve import resolve_task
    from cuda_agent_cli.writeback.fingerprint import unpatched_candidates

    call = call_from_json(json.loads(entry["input_spec"])) if entry.get("input_spec") else None
    task = resolve_task(entry["target"], root, inputs=call, device=entry.get("device"))
    candidates = unpatched_candidates(task.module_source, task.target.class_name)
    unchanged = next(
        (t for t in candidates if hashlib.sha256(t.encode()).hexdigest() == entry.get("module_sha256")), None
    )
    if unchanged is not None and entry.get("reference_standalone"):
        task = replace(task, module_source=unchanged, standalone=True)
    elif task.standalone:
        task = replace(task, module_source=candidates[0])
    else:
        return task
    return replace(task, reference_source=reference_source(task))


def measure(
    root: Path,
    entry: dict[str, Any],
    *,
    atol: float,
    rtol: float,
    scratch: Path | None = None,
    precision: str | None = None,
) -> Measurement:
    """Verify and profile the kernel of `entry`; never raises for a kernel that fails."""
    import time

    from cuda_agent_cli.harness import Harness
    from cuda_agent_cli.workspace import cache_dir, judging_workspace

    start = time.perf_counter()
    device = entry.get("device") or "cuda"
    policy: Policy = entry.get("policy") or "strict"
    base = scratch or cache_dir() / "check"
    base.mkdir(parents=True, exist_ok=True)
    try:
        task = _reference_task(root, entry)
    except CudaAgentError as exc:
        if isinstance(exc, EnvironmentMissing):
            return Measurement(not_measured=exc.one_line(), seconds=time.perf_counter() - start)
        return Measurement(error=exc.one_line(), seconds=time.perf_counter() - start)
    files = KernelFiles.read(root / entry["folder"])
    if files.model_new is None:
        return Measurement(
            error=f"{entry['folder']}/model_new.py is not a regular file", seconds=time.perf_counter() - start
        )
    workspace = judging_workspace(base, task.reference_source, files, device, policy)
    try:
        # The precision the kernel was recorded at, unless the caller names one.
        held = precision or str(entry.get("precision") or "dtype")
        harness = Harness(workspace, device=device, policy=policy, atol=atol, rtol=rtol, precision=held)
    except EnvironmentMissing as exc:
        return Measurement(not_measured=exc.one_line(), seconds=time.perf_counter() - start)
    result = harness.profile()
    if result.not_measured and result.correct:
        # Verified, but another program kept the GPU busy: NOT-MEASURED, never a slower kernel.
        return Measurement(not_measured=f"not measured: {result.not_measured}", seconds=time.perf_counter() - start)
    return Measurement(result=result, seconds=time.perf_counter() - start)

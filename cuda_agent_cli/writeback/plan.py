"""A session's best kernel -> the write-back plan, with the manifest entry write-back records.

Write-back owns what it records: the runner hands over the task, the verified result and the
candidate's files, and this module fills the manifest entry (the verified call, where and how it
was measured, the numbers) before `apply.build_plan` adds the fingerprints and file hashes.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Collection, Mapping

from cuda_agent_cli.config import Policy
from cuda_agent_cli.harness_result import HarnessResult
from cuda_agent_cli.kernel_files import KernelFiles
from cuda_agent_cli.task.inputs import CallSpec, call_to_json
from cuda_agent_cli.task.target import Task
from cuda_agent_cli.writeback.apply import WriteBackPlan, build_plan
from cuda_agent_cli.writeback.integrate import Case, IntegrationSpec, Verified

BINDING_FILES = ("binding.cpp", "binding_registry.h")


def _interval(iv: tuple[float, float] | None) -> list[float] | None:
    return list(iv) if iv is not None else None


def manifest_entry(
    task: Task,
    device: str,
    policy: Policy,
    best: HarnessResult,
    session_id: str,
    record: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What the manifest records about a kernel from its session."""
    from cuda_agent_cli.machine import this_machine

    t = best.timings
    env = best.environment
    machine = this_machine()
    return {
        "target": task.target.display,
        "class": task.target.class_name,
        "module": task.target.module_name,
        "module_sha256": task.module_sha256,
        "reference_standalone": bool(task.standalone),
        "inputs_source": "get_inputs" if task.uses_module_inputs else "spec",
        "inputs": task.call.describe(),
        "input_spec": json.dumps(call_to_json(task.call), separators=(",", ":")),
        "device": device,
        "arch": machine.arch(device, env.get("gpu")) or "",
        "gpu": env.get("gpu") or "",
        "cpu": machine.cpu_name if device == "cpu" else None,
        "torch": env.get("torch") or machine.torch or "",
        "cuda": env.get("cuda") or None,
        "policy": policy,
        # The rule its outputs were verified by (tools/precision.py): the module's own dtype,
        # unless a looser one was chosen; check verifies it again by the same rule.
        "precision": best.precision if best.precision in ("tf32", "fp16", "bf16", "kernelbench") else "dtype",
        "reward": best.reward,
        "eager_us": t.eager_us if t else None,
        "compile_us": t.compile_us if t else None,
        "kernel_us": t.candidate_us if t else None,
        "speedup_vs_eager": t.speedup_vs_eager if t else None,
        "speedup_vs_eager_interval": _interval(t.speedup_vs_eager_interval) if t else None,
        "speedup_vs_compile": t.speedup_vs_compile if t else None,
        "speedup_vs_compile_interval": _interval(t.speedup_vs_compile_interval) if t else None,
        "best_baseline": t.best_baseline if t else None,
        "speedup_vs_best": t.speedup_vs_best if t else None,
        "speedup_vs_best_interval": _interval(t.speedup_vs_best_interval) if t else None,
        "fraction_of_peak": t.fraction_of_peak if t else None,
        "method": (t.method if t else "") or "",
        "trials": t.trials if t else None,
        "session": session_id,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **(record or {}),
    }


def binding_files(binding_dir: Path | None) -> dict[str, str]:
    """The locked binding files the kernel folder ships (the workspace's, else the template's)."""
    from cuda_agent_cli.resources import sandbox_template_dir

    base = binding_dir if binding_dir is not None else sandbox_template_dir()
    return {name: (base / name).read_text() for name in BINDING_FILES}


def plan_for_session(
    task: Task,
    files: KernelFiles | Mapping[str, str],
    binding_dir: Path | None,
    device: str,
    policy: Policy,
    best: HarnessResult,
    session_id: str,
    used: Collection[CallSpec] | None = None,
    record: dict[str, Any] | None = None,
) -> WriteBackPlan:
    """Every change applying the session's best kernel would make, computed without writing.
    `used`: the task's further calls the kernel will run for (None: all of them); `record`: more
    for the manifest (every call judged and the weighted aggregate; the speedup per call as the
    user's Python makes it). `files`: the candidate's, or folder-relative paths and texts to take
    them from by KernelFiles's rule."""
    from cuda_agent_cli.writeback.fingerprint import class_digest

    verified = Verified(
        device=device,
        call=task.call,
        forward_params=task.forward_params,
        parameters=task.parameters,
        training_sensitive=task.training_sensitive,
        output=task.output,
        count=task.count,
        more=tuple(Case(c.call, c.output, c.count, c.parameters) for c in task.more if used is None or c.call in used),
        source_sha256=class_digest(task.module_source, task.target.class_name),
    )
    spec = IntegrationSpec(
        module_file=task.file,
        module_source=task.module_source,
        class_name=task.target.class_name,
        class_snake=task.class_snake,
        class_end=task.class_end,
        display=task.target.display,
        session_id=session_id,
        candidate=files if isinstance(files, KernelFiles) else KernelFiles.of(files),
        binding_files=binding_files(binding_dir),
        verified=verified,
    )
    return build_plan(
        spec,
        manifest_entry=manifest_entry(task, device, policy, best, session_id, record),
        fallback_root=task.target.repo_root,
    )

"""What the jobs' replies decide: the checks of a result, then whether it is correct and its reward.

The static checks read the sources; the evaluate job's reply carries what the candidate's process
claims and what its controller saw (tools/controller.py); the judge decides every output check
in a process the candidate never ran in (tools/verify_kernels.py); what ran on the device and
what the built library calls are held against the policy. `finish` then decides: correct only
when it compiled, something was judged correct and no check failed; the reward from the timing
intervals (harness/reward.py), held at 1 where the clock could not check the kernel's claims.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

from cuda_agent_cli.config import Policy
from cuda_agent_cli.errors import WorkspaceError
from cuda_agent_cli.harness import extension_check, library_symbols, reward, wire
from cuda_agent_cli.harness.pool import JobOutcome
from cuda_agent_cli.harness_result import Check, HarnessResult
from cuda_agent_cli.workspace import Workspace

# A candidate refused only because the strict policy forbids the torch ops it uses.
POLICY_ONLY = "rejected by policy strict (would be judged under hybrid)"


def lock_check(result: HarnessResult, workspace: Workspace) -> None:
    """Whether the locked files of the workspace still hash as recorded (a change is a violation)."""
    if not workspace.locked:
        return
    problems = workspace.lock_violations()
    result.checks.append(
        Check("lock", not problems, "; ".join(problems) if problems else "locked files match their recorded hashes")
    )
    if problems:
        result.errors.append("lock violation: " + "; ".join(problems))


def static_check(result: HarnessResult, model_new: str, sources: dict[str, str], policy: Policy) -> bool:
    """The static checks of model_new.py and the kernel sources; False where one refuses them."""
    from cuda_agent_cli.harness import static

    findings = static.check_sources(model_new, sources, policy)
    errors = [f for f in findings if f.severity == "error"]
    for f in findings:
        if f.severity != "error":
            result.warnings.append(f.to_detail())
    detail = "; ".join(f.to_detail() for f in errors[:6]) if errors else "no forbidden constructs found"
    if errors and policy == "strict":
        hybrid = static.errors(static.check_sources(model_new, sources, "hybrid"))
        if not hybrid:
            detail += f" ({POLICY_ONLY})"
    result.checks.append(Check("static", not errors, detail))
    return not errors


def evaluation_checks(
    result: HarnessResult, info: wire.EvaluateResult, log_tail: str, kernelbench: bool, timeout: float
) -> None:
    """The evaluate job's reply into checks: the candidate process's own (claims), how its
    processes ended, and what the controller refused."""
    claims: wire.Claims = info.get("claims") or {}
    for c in claims.get("checks", []):
        result.checks.append(Check(c["name"], bool(c["passed"]), str(c["detail"])))
        if c["name"] == "compile" and not c["passed"]:
            result.compiled = False
    if (
        kernelbench
        and result.compiled
        and info.get("stage") != "import"
        and not any(c.name == "compile" for c in result.checks)
    ):
        result.checks.insert(
            len(result.checks) - len(claims.get("checks", [])),
            Check("compile", True, "model_new.py built its extension with load_inline"),
        )
    # Recorded where it took effect; `cuda-agent doctor` says when the kernel cannot do it.
    confinement = str(claims.get("write_confinement") or "")
    if confinement.startswith("Landlock"):
        result.checks.append(Check("write_confinement", True, confinement))
    filtered = str(claims.get("process_filter") or "")
    if filtered.startswith("seccomp"):
        result.checks.append(Check("process_filter", True, filtered))
    if info.get("baselines_failed"):
        raise WorkspaceError(
            f"timing the reference failed: {info.get('error', '')}", "make sure the reference runs on this device"
        )
    if info.get("channel_error") and not any(c.name == "crash" and not c.passed for c in result.checks):
        if info.get("timed_out"):
            result.checks.append(
                Check(
                    "timeout",
                    False,
                    f"the candidate process ran past its time limit ({timeout:.0f} s for one request) and was killed",
                )
            )
        else:
            how = (info.get("exits") or {}).get("candidate", "ended")
            tail = " | ".join(log_tail.strip().splitlines()[-4:])
            result.checks.append(Check("crash", False, f"the candidate process {how}" + (f": {tail}" if tail else "")))
    if info.get("strays"):
        result.checks.append(Check("processes", False, str(info.get("error", ""))))
    if info.get("forged_times"):
        result.checks.append(Check("harness_integrity", False, str(info.get("error", ""))))
    if info.get("device_contention"):
        # Another program on the device: not the candidate's fault, so no check fails; the
        # profile is made again, and then judged without a clock (Harness.profile).
        result.not_measured = str(info.get("error") or "the device was busy with another program")
        return
    if info.get("stage") != "done" and "error" in info and not result.failed_checks():
        result.checks.append(Check("crash", False, str(info["error"])))


def judge_checks(result: HarnessResult, judge: JobOutcome) -> bool:
    """The judge's checks into `result`; False where it could not judge (a crash is recorded)."""
    verdict = cast("wire.JudgeResult", judge.result or {})
    if judge.ok and verdict.get("reference_error"):
        raise WorkspaceError(
            f"the reference model failed on its own inputs: {verdict['reference_error']}",
            "fix model.py so Model(*get_init_inputs())(*get_inputs()) runs",
        )
    if not judge.ok:
        result.checks.append(Check("crash", False, f"judging the outputs failed: {judge.describe_failure()}"))
        return False
    for c in verdict.get("checks", []):
        result.checks.append(Check(c["name"], c["passed"], c["detail"]))
    result.precision = verdict.get("verified_precision")
    return True


def kernel_checks(
    result: HarnessResult, info: wire.EvaluateResult, kernel_sources: list[str], device: str, policy: Policy
) -> None:
    """Whether the extension's own kernels ran (and on CUDA, whose kernels the profiler saw)."""
    claims: wire.Claims = info.get("claims") or {}
    result.checks.append(
        extension_check.extension_kernel_check(
            device,
            int(claims.get("ext_calls", 0)),
            info.get("cuda_kernels"),
            extension_check.kernel_names_in_sources(kernel_sources),
            info.get("cuda_kernels_error"),
            ext_shares=[float(x) for x in claims.get("ext_shares") or [] if isinstance(x, (int, float))],
            policy=policy,
            library_calls=extension_check.library_calls_in_sources(kernel_sources),
        )
    )
    seen = extension_check.torch_kernels_check(device, policy, info.get("cuda_kernels"))
    if seen is not None:
        result.checks.append(seen)


def library_calls(result: HarnessResult, libraries: list[Path], device: str, policy: Policy) -> None:
    """What the built libraries call in other libraries, against the policy (harness/library_symbols.py)."""
    from cuda_agent_cli.assets.tools import allowed_ops

    allowed = allowed_ops.ALLOWED_ATEN - allowed_ops.ACCUMULATING
    result.checks.append(library_symbols.library_check(libraries, device, policy, allowed))


def finish(result: HarnessResult) -> HarnessResult:
    """Correct, the errors a reader sees first, and the reward (null where the round could not
    be measured for a reason that is not the candidate's)."""
    failed = result.failed_checks()
    if result.not_measured and not failed:
        result.correct, result.reward, result.timings = False, None, None
        return result
    if failed and all(c.name == "torch_ops" or POLICY_ONLY in c.detail for c in failed):
        # Only the policy refused it: torch ops where strict forbids them (a bench report
        # tells such a task from one that is wrong).
        result.errors.insert(0, POLICY_ONLY)
    result.correct = result.compiled and not failed and any(c.name == "correctness" for c in result.checks)
    for c in failed:
        line = f"{c.name}: {c.detail.splitlines()[0] if c.detail else ''}"
        if line not in result.errors and not any(e.startswith(c.name) for e in result.errors):
            result.errors.append(line)
    if not result.correct:
        result.reward = -1
    elif result.timings is not None:
        t = result.timings
        against = t.speedup_vs_best_interval if t.reward_baseline == "best" else t.speedup_vs_compile_interval
        result.reward = reward.reward_for_intervals(t.speedup_vs_eager_interval, against)
        if (result.timing_detail or {}).get("reward_held"):
            result.reward = min(result.reward, 1)
    else:
        result.reward = None
    return result

"""Harness: compile -> verify -> profile -> reward, driving the locked tools/ jobs in processes.

This process never imports model_new.py, the reference or torch: it orders the jobs, reads the
numbers they hand back through harness-owned files, computes the statistics and the reward.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path
from typing import Any, Mapping, Sequence, cast

from cuda_agent_cli import resources
from cuda_agent_cli.config import POLICIES, Policy
from cuda_agent_cli.errors import BadInput, WorkspaceError
from cuda_agent_cli.harness import (
    jobs,
    library_symbols,
    prepare,
    reference_check,
    roofline,
    run_folder,
    verdict,
    window,
    wire,
)
from cuda_agent_cli.harness.baselines import check_reward_baseline, compiled_baselines
from cuda_agent_cli.harness.build import Builder
from cuda_agent_cli.harness.environment import check_environment
from cuda_agent_cli.harness.pool import JobOutcome, Ticket, WorkerPool, clean_env, shared_pool
from cuda_agent_cli.harness.precision import check_precision
from cuda_agent_cli.harness_result import Check, HarnessResult
from cuda_agent_cli.kernel_files import KernelFiles
from cuda_agent_cli.machine import cpu_timing_threads, gpu_busy_elsewhere, pick_device
from cuda_agent_cli.workspace import Workspace, cache_dir, external_workspace, pair_workspace

DEFAULT_TRIALS = {"cuda": (40, 5), "cpu": (100, 3)}  # (timed calls per side, warm-up calls)
_BLOCK = {"cuda": 5, "cpu": 5}  # calls per side per round of the side-by-side window
_MIN_TRIALS = 10
# Every timed output stays in the candidate's process until the checked ones are chosen.
_KEPT_OUTPUT_BYTES = {"cuda": 8 * 2**30, "cpu": 2 * 2**30}
SEEDS = 5
TIMED_SETS = 2  # fresh input sets (not the verification ones) the timed calls are drawn from


# Timed calls whose outputs are checked: at least this many, and as many as a kernel wrong on
# one timed call in DETECT_ONE_IN needs to be caught with probability DETECT (the controller
# works the number out from how many calls were timed: 19 of 100, 16 of 40). Chosen at random
# after the calls returned; each costs a saved output and a comparison.
TIMED_CHECKS = 3
DETECT_ONE_IN, DETECT = 5, 0.99

# Rounds of bursts after the side-by-side window (tools/bursts.py, BURST_*), the inputs and
# outputs one burst may hold, and the outputs of all bursts kept to be checked.
BURST_ROUNDS = {"cuda": 8, "cpu": 0}
BURST_RETRY_ROUNDS = 8  # where a profile's first window did not resolve the kernel and had none
_BURST_BYTES = {"cuda": 4 * 2**30, "cpu": 2**29}
_BURST_CHECK_BYTES = {"cuda": 2 * 2**30, "cpu": 2**28}

# A profile whose kernel the clock did not resolve is timed again once, with blocks (and calls)
# this many times as many.
LONGER_BLOCKS = 4


class Harness:
    """One workspace's trusted pipeline; cheap to call again and again from a long-lived process."""

    def __init__(
        self,
        workspace: Workspace,
        device: str | None = None,
        policy: Policy = "strict",
        atol: float = 1e-2,
        rtol: float = 1e-2,
        trials: int | None = None,
        warmup: int | None = None,
        timeout: float = 300.0,
        compile_timeout: float = 900.0,
        confine_writes: bool = True,
        static_checks: bool = True,
        baselines: Sequence[str] | None = None,
        reward_baseline: str = "paper",
        bursts: int | None = None,
        precision: str = "dtype",
    ) -> None:
        if policy not in POLICIES:
            raise BadInput(f"unknown policy {policy!r}", "use --policy strict or --policy hybrid")
        self.precision = check_precision(precision)
        self.workspace = workspace
        self.policy = policy
        self.atol, self.rtol = float(atol), float(rtol)
        self.timeout, self.compile_timeout = timeout, compile_timeout
        # Landlock write confinement of the candidate's process, on both devices (the CUDA
        # driver's needs, its device nodes and JIT cache, stay writable). Off only to test the
        # layers behind it on their own.
        self.confine_writes = bool(confine_writes)
        # Off only to test the runtime layers behind the static checks on their own.
        self.static_checks = bool(static_checks)
        self._cache = cache_dir()
        self._env, self.pool = _worker(self._cache)
        # None: what this machine has, decided where every front door decides it.
        self.device = pick_device(device)
        self._check_environment()
        self.builder = Builder(workspace, self.device, self.pool, self._cache, compile_timeout, self.confine_writes)
        self.peaks = roofline.MachinePeaks(self._cache, self.device)
        # The compiled baselines timed beside eager, and what the reward is decided against.
        self.baselines = compiled_baselines(baselines, self.device)
        self.reward_baseline = check_reward_baseline(reward_baseline)
        default_trials, default_warmup = DEFAULT_TRIALS[self.device]
        self.trials = int(trials or default_trials)
        self.warmup = int(warmup if warmup is not None else default_warmup)
        # Rounds of bursts after the window, for kernels too short for its calls to resolve
        # (tools/timing.py): on CUDA, where the harness's work around a call is milliseconds.
        self.bursts = int(bursts if bursts is not None else BURST_ROUNDS[self.device])
        self._block_scale = 1  # LONGER_BLOCKS while a profile is timed again in longer blocks
        # Both sides of a CPU comparison run with the same number of threads: half the cores
        # torch sees in the worker (machine.cpu_timing_threads says why).
        self.threads: int | None = None
        if self.device == "cpu":
            cores = int(self.pool.probe("cpu", self._scratch()).get("cpu_threads") or os.cpu_count() or 1)
            self.threads = cpu_timing_threads(cores)

    @property
    def last_compile(self) -> wire.CompileResult | None:
        """The last build's result (its rebuilt objects, whether a precompiled header was used)."""
        return self.builder.last_compile

    def start_ahead(self) -> Any:
        """Start the worker and warm the baselines for this reference in the background, so a
        session's first round finds both ready (a new session otherwise waits for the worker to
        import torch and for torch.compile to load its cached artifacts in a new process).
        Errors are left for the first round to report. Returns the thread doing it."""
        import threading

        def warm() -> None:
            try:
                prewarm = jobs.baselines_spec(
                    str(self.workspace.reference),
                    self.device,
                    self.threads,
                    self.baselines,
                    self.peaks.known(),
                    self.precision,
                )
                self.pool.wait(
                    self.pool.submit(
                        "service",
                        {},
                        self._scratch() / "ahead",
                        60,
                        service=jobs.prewarm_request(self._baselines_service(), prewarm),
                    )
                )
                # The zygote's own warm-up, which a first round's jobs would otherwise wait for.
                self.pool.wait(self.pool.submit("warm", {}, self._scratch() / "ahead", 120))
            except Exception:
                pass

        thread = threading.Thread(target=warm, name="harness-start-ahead", daemon=True)
        thread.start()
        return thread

    # -- environment ------------------------------------------------------------------------

    def _scratch(self) -> Path:
        path = self._cache / "worker"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _check_environment(self) -> None:
        check_environment(self.pool.probe(self.device, self._scratch()), self.device, self._env)

    def environment(self) -> dict[str, Any]:
        info = self.pool.probe(self.device, self._scratch())
        return {"gpu": info.get("gpu"), "torch": info.get("torch") or "", "cuda": info.get("cuda")}

    # -- helpers ----------------------------------------------------------------------------

    def _new_result(self) -> HarnessResult:
        return HarnessResult(
            compiled=False,
            correct=False,
            reward=-1,
            device=self.device,
            policy=self.policy,
            environment=self.environment(),
        )

    def _run(self, job: str, spec: Mapping[str, Any], run_dir: Path, timeout: float | None = None) -> JobOutcome:
        return self.pool.run(job, spec, run_dir / job, timeout or self.timeout)

    def _lock_check(self, result: HarnessResult) -> None:
        verdict.lock_check(result, self.workspace)

    def _cpp_sources(self) -> dict[str, str]:
        """The kernel sources in kernels/, by the rule the build copies them with (KernelFiles): the
        static checks read exactly what gets compiled or included."""
        return KernelFiles.read(self.workspace.root).sources()

    # -- compile ----------------------------------------------------------------------------

    def compile(self) -> HarnessResult:
        result = self._new_result()
        self._lock_check(result)
        if (
            self.workspace.kind == "kernelbench"
            and self.static_checks
            and not verdict.static_check(
                result, self.workspace.candidate.read_text(errors="replace"), self._cpp_sources(), self.policy
            )
        ):
            # Its build is its import: code the static checks refused is not run.
            result.reward = -1
            return result
        self.builder.build(result, run_folder.new())
        result.reward = -1 if not result.compiled or result.failed_checks() else None
        return result

    # -- verify / profile -------------------------------------------------------------------

    def verify(self) -> HarnessResult:
        return self._evaluate(timed=False)

    def profile(self) -> HarnessResult:
        result = self._evaluate(timed=True)
        if result.not_measured:
            result = self._measure_again(result)
        if result.correct and (result.timing_detail or {}).get("below_resolution"):
            # The harness's clock did not resolve the kernel against how much its own work per
            # call wandered (a loaded machine): timed once more in blocks LONGER_BLOCKS times as
            # long, whose time per call wanders less, and followed by bursts where the first
            # window had none (the CPU), before its reward is held. What no clock resolves (a
            # share of the harness's own work) stays held.
            self._block_scale = LONGER_BLOCKS
            bursts = self.bursts
            self.bursts = bursts or BURST_RETRY_ROUNDS
            try:
                again = self._evaluate(timed=True)
            finally:
                self._block_scale = 1
                self.bursts = bursts
            if again.timings is not None or not again.correct:
                again.warnings.append(
                    f"timed again in blocks of {_BLOCK[self.device] * LONGER_BLOCKS} calls"
                    + ("" if bursts else " and in bursts")
                    + ": the first window's clock did not resolve the kernel"
                )
                return again
        return result

    def _measure_again(self, busy: HarnessResult) -> HarnessResult:
        """A profile the device was too busy to time. Where the device is quiet once the round's
        processes are gone, the work that kept it busy was the candidate's own (left queued, or
        spinning while its process was stopped): a failed check. Where another program keeps it
        busy: timed once more, and if still busy, judged without a clock and marked not
        measured, its reward null (never -1: the fault is not the candidate's)."""
        if gpu_busy_elsewhere() is False:
            busy.checks.append(Check("device_contention", False, str(busy.not_measured)))
            busy.not_measured = None
            return verdict.finish(busy)
        again = self._evaluate(timed=True)
        if not again.not_measured:
            return again
        judged = self._evaluate(timed=False)
        if judged.correct:
            judged.not_measured = again.not_measured
            judged.reward = None
            judged.warnings.append(f"not_measured: {again.not_measured} (twice); the kernel was verified, not timed")
        return judged

    def _evaluate(self, timed: bool) -> HarnessResult:
        with run_folder.evaluation() as run_dir:
            return self._evaluate_in(run_dir, timed)

    def _evaluate_in(self, run_dir: Path, timed: bool) -> HarnessResult:
        result = self._new_result()
        self._lock_check(result)
        candidate_path = self.workspace.candidate
        if not candidate_path.is_file():
            result.checks.append(Check("import", False, "model_new.py does not exist: write class ModelNew there"))
            result.errors.append("model_new.py is missing")
            return result
        model_new = candidate_path.read_text(errors="replace")
        start = time.perf_counter()
        static_ok = not self.static_checks or verdict.static_check(result, model_new, self._cpp_sources(), self.policy)
        result.stage_seconds["static"] = time.perf_counter() - start
        if not static_ok or result.failed_checks():
            if self.workspace.kind == "kernelbench":
                result.compiled = True  # its build is its import: code the static checks refused is not run
            else:
                self.builder.build(result, run_dir)  # compiler errors are worth reporting too
            return self._finish(result)

        # The candidate runs from a snapshot: exactly the text that was checked.
        snapshot = run_dir / "model_new.py"
        snapshot.write_text(model_new)
        n_sets = SEEDS + (TIMED_SETS if timed else 0)
        seeds = [secrets.randbelow(2**31 - 2) for _ in range(n_sets)]
        dirs = {name: run_dir / name for name in ("tensors_in", "tensors_cand")}
        for d in dirs.values():
            d.mkdir(mode=0o700)
        spec = jobs.evaluate_request(
            device=self.device,
            policy=self.policy,
            candidate=snapshot,
            reference=self.workspace.reference,
            inputs_dir=dirs["tensors_in"],
            out_dir=dirs["tensors_cand"],
            n=SEEDS,
            seeds=seeds,
            timed_sets=list(range(SEEDS, n_sets)),
            extensions_dir=self.builder.inline_dir(),
            writable=run_dir / "evaluate",
            confine_writes=self.confine_writes,
            threads=self.threads,
            checks=TIMED_CHECKS,
            one_in=DETECT_ONE_IN,
            detect=DETECT,
            call_timeout=self.timeout,
            go_file=run_dir / "go.json",
            go_timeout=self.compile_timeout + 60,
            baselines=self.baselines,
            peaks=self.peaks.known(),
            precision=self.precision,
        )
        evaluating, inputs = self._build_and_prepare(result, run_dir, spec)
        if evaluating is None:
            return self._finish(result)
        outcome = self.pool.wait(evaluating)
        result.stage_seconds["candidate"] = outcome.seconds
        self._record_phases(result, "candidate", outcome.result)
        if not outcome.ok:
            name = "timeout" if outcome.status == "timeout" else "crash"
            detail = outcome.describe_failure()
            result.checks.append(Check(name, False, detail))
            result.errors.append(detail)
            return self._finish(result)
        info = cast("wire.EvaluateResult", outcome.result or {})
        if info.get("stage") == "not_compiled":
            return self._finish(result)
        verdict.evaluation_checks(result, info, outcome.log_tail, self.workspace.kind == "kernelbench", self.timeout)
        if info.get("stage") != "done":
            return self._finish(result)

        start = time.perf_counter()
        judged = self._run(
            "judge",
            jobs.judge_request(
                spec,
                jobs.judged_calls(info, SEEDS),
                info.get("commits") or {},
                inputs.get("fingerprints") or [],
                self.atol,
                self.rtol,
            ),
            run_dir,
        )
        result.stage_seconds["judge"] = time.perf_counter() - start
        self._record_phases(result, "judge", judged.result)
        if not verdict.judge_checks(result, judged):
            return self._finish(result)
        kernel_sources = list(self._cpp_sources().values()) + [model_new]
        verdict.kernel_checks(result, info, kernel_sources, self.device, self.policy)
        if self.static_checks:  # the built library read like its sources: off only to test what runs
            libraries = library_symbols.built_libraries(self.builder.module_dir, self.builder.inline_dir(), model_new)
            verdict.library_calls(result, libraries, self.device, self.policy)
        if timed and not result.failed_checks():
            window.read_window(
                result,
                info,
                info.get("claims") or {},
                int(inputs.get("input_bytes", 0)),
                threads=self.threads,
                reward_baseline=self.reward_baseline,
                peaks=self.peaks,
            )
        return self._finish(result)

    def _build_and_prepare(
        self, result: HarnessResult, run_dir: Path, spec: wire.EvaluateRequest
    ) -> tuple[Ticket | None, wire.InputsResult]:
        kernelbench = self.workspace.kind == "kernelbench"
        return prepare.build_and_prepare(
            result,
            run_dir,
            spec,
            pool=self.pool,
            builder=self.builder,
            service=self._baselines_service(),
            timing_plan=self._timing_plan,
            inputs_timeout=self.timeout,
            evaluate_timeout=self.timeout * 3 + self.compile_timeout * (2 if kernelbench else 1),
            reference=self.workspace.reference,
        )

    def _baselines_service(self) -> wire.ServiceRequest:
        """The baselines service the worker keeps warm for this reference (jobs.service_key)."""
        return jobs.service_key(
            self.workspace.reference,
            self.device,
            self.threads,
            self.baselines,
            self._cache / "worker" / "baselines-service.log",
            self.precision,
        )

    def _timing_plan(self, input_bytes: int) -> wire.TimingPlan:
        """Timed calls, warm-up calls and the block size. Every timed output is kept until the
        checked ones are chosen, so the calls are as many as fit the memory set aside for them."""
        budget = _KEPT_OUTPUT_BYTES[self.device]
        trials = self.trials * self._block_scale
        if input_bytes > 0:
            trials = max(_MIN_TRIALS, min(trials, budget // input_bytes))
        block = max(1, min(_BLOCK[self.device] * self._block_scale, trials))
        return jobs.timing_plan(
            trials, self.warmup, block, self.bursts, _BURST_BYTES[self.device], _BURST_CHECK_BYTES[self.device]
        )

    def _finish(self, result: HarnessResult) -> HarnessResult:
        self.builder.build_pch_if_wanted()
        return verdict.finish(result)

    @staticmethod
    def _record_phases(result: HarnessResult, job: str, info: dict[str, Any] | None) -> None:
        for name, seconds in ((info or {}).get("phases") or {}).items():
            if isinstance(seconds, (int, float)):
                result.phase_seconds[f"{job}.{name}"] = float(seconds)


def _worker(cache: Path) -> tuple[dict[str, str], WorkerPool]:
    """The environment of the harness's processes and the worker every Harness of this process
    shares for `cache`."""
    # torch.compile's own caches (content-addressed by torch): the cache's, or a folder several
    # caches share (CUDA_AGENT_COMPILE_CACHE, such as a test suite's between its runs).
    shared = os.environ.get("CUDA_AGENT_COMPILE_CACHE")
    compiled = Path(shared) if shared else cache
    env = clean_env(
        {
            "TORCHINDUCTOR_CACHE_DIR": str(compiled / "inductor"),
            "TRITON_CACHE_DIR": str(compiled / "triton"),
            # The torch.compile baseline builds beside the extension's build: a pool of one
            # compiler process per core (each importing torch) would starve nvcc.
            "TORCHINDUCTOR_COMPILE_THREADS": "1",
            # Where the worker keeps torch's bytecode when torch was installed without it
            # (tools/worker.py, keep_bytecode).
            "CUDA_AGENT_BYTECODE_DIR": str(cache / "bytecode"),
        }
    )
    return env, shared_pool(resources.tools_dir(), env, cache / "worker" / "worker.log")


def warm_worker() -> dict[str, Any]:
    """Start this process's harness worker and have it warm up now (the dispatch modes' imports
    and torch.compile's), for a caller about to score many references with it, such as a bench
    slot: every reference's baselines then start with torch.compile loaded instead of importing
    it again. Returns the worker's answer ({} when it failed: the first round reports why)."""
    cache = cache_dir()
    _, pool = _worker(cache)
    try:
        scratch = cache / "worker"
        scratch.mkdir(parents=True, exist_ok=True)
        return pool.wait(pool.submit("warm-compiler", {}, scratch / "ahead", 180)).result or {}
    except Exception:
        return {}


# -- entry points for `cuda-agent verify|profile` -------------------------------------------------


def _validate_reference(ws: Workspace) -> None:
    problems = reference_check.reference_problems(ws.reference.read_text(errors="replace"), ws.reference.name)
    if problems:
        raise WorkspaceError(problems[0], "a reference needs class Model and get_inputs() (KernelBench convention)")


def open_path(path: Path | None = None, ref: Path | None = None, candidate: Path | None = None) -> Workspace:
    """A workspace for `verify|profile`: a directory, or --ref FILE --candidate FILE."""
    if ref is not None or candidate is not None:
        if ref is None or candidate is None:
            raise BadInput("--ref and --candidate go together", "pass both files, or a directory instead")
        ws = pair_workspace(ref, candidate)
    else:
        if path is None:
            raise BadInput("no path given", "pass a directory with model.py and model_new.py")
        ws = external_workspace(path)
    _validate_reference(ws)
    return ws


def verify_path(
    path: Path | None = None, *, ref: Path | None = None, candidate: Path | None = None, **options: Any
) -> HarnessResult:
    return Harness(open_path(path, ref, candidate), **options).verify()


def profile_path(
    path: Path | None = None, *, ref: Path | None = None, candidate: Path | None = None, **options: Any
) -> HarnessResult:
    return Harness(open_path(path, ref, candidate), **options).profile()

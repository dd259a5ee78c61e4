"""Harness: compile -> verify -> profile -> reward, driving the locked tools/ jobs in processes.

This process never imports model_new.py, the reference or torch: it orders the jobs, reads the
numbers they hand back through harness-owned files, computes the statistics and the reward.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import secrets
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping, Sequence, cast

from cuda_agent_cli import resources
from cuda_agent_cli.config import POLICIES, Policy
from cuda_agent_cli.errors import BadInput, EnvironmentMissing, WorkspaceError
from cuda_agent_cli.harness import clock_stats, extension_check, jobs, reference_check, review, reward, roofline, wire
from cuda_agent_cli.harness.baselines import check_reward_baseline, compiled_baselines
from cuda_agent_cli.harness.pool import JobOutcome, Ticket, WorkerPool, clean_env, shared_pool
from cuda_agent_cli.harness_result import Check, HarnessResult, Timings
from cuda_agent_cli.kernel_files import KernelFiles
from cuda_agent_cli.machine import cpu_timing_threads, environment_key, pick_device
from cuda_agent_cli.workspace import Workspace, cache_dir, external_workspace, pair_workspace

DEFAULT_TRIALS = {"cuda": (40, 5), "cpu": (100, 3)}  # (timed calls per side, warm-up calls)
_BLOCK = {"cuda": 5, "cpu": 5}  # calls per side per round of the side-by-side window
_MIN_TRIALS = 10
# Every timed output stays in the candidate's process until the checked ones are chosen.
_KEPT_OUTPUT_BYTES = {"cuda": 8 * 2**30, "cpu": 2 * 2**30}
_LOAD_WARNING_CORES = 0.3
SEEDS = 5
TIMED_SETS = 2  # fresh input sets (not the verification ones) the timed calls are drawn from


def _nvcc_present(env: dict[str, str]) -> bool:
    return shutil.which("nvcc", path=env.get("PATH")) is not None


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

# A candidate refused only because the strict policy forbids the torch ops it uses.
POLICY_ONLY = "rejected by policy strict (would be judged under hybrid)"


def _thread_affinities() -> dict[int, set[int]]:
    """The CPUs each thread of this process may run on (empty where the system cannot say)."""
    found: dict[int, set[int]] = {}
    try:
        for tid in os.listdir("/proc/self/task"):
            found[int(tid)] = os.sched_getaffinity(int(tid))
    except (OSError, ValueError, AttributeError):
        return {}
    return found


def _restore_affinities(before: dict[int, set[int]]) -> None:
    for tid, cpus in before.items():
        try:
            if os.sched_getaffinity(tid) != cpus:
                os.sched_setaffinity(tid, cpus)
        except OSError:
            continue


PCH_BACKGROUND_MIN_CORES = 8
# The folders (one per device) this process has asked to precompile torch/extension.h into
_PCH_STARTED: set[str] = set()

# CPU priority of the inputs job, which runs beside a build and times nothing.
_BESIDE_BUILD = 10


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
    ) -> None:
        if policy not in POLICIES:
            raise BadInput(f"unknown policy {policy!r}", "use --policy strict or --policy hybrid")
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
        self._pch_wanted = False
        self._env, self.pool = _worker(self._cache)
        # None: what this machine has, decided where every front door decides it.
        self.device = pick_device(device)
        self._check_environment()
        # The compiled baselines timed beside eager, and what the reward is decided against.
        self.baselines = compiled_baselines(baselines, self.device)
        self.reward_baseline = check_reward_baseline(reward_baseline)
        default_trials, default_warmup = DEFAULT_TRIALS[self.device]
        self.trials = int(trials or default_trials)
        self.warmup = int(warmup if warmup is not None else default_warmup)
        # Rounds of bursts after the window, for kernels too short for its calls to resolve
        # (tools/timing.py): on CUDA, where the harness's work around a call is milliseconds.
        self.bursts = int(bursts if bursts is not None else BURST_ROUNDS[self.device])
        self.last_compile: wire.CompileResult | None = None
        self._block_scale = 1  # LONGER_BLOCKS while a profile is timed again in longer blocks
        # Both sides of a CPU comparison run with the same number of threads: half the cores
        # torch sees in the worker (machine.cpu_timing_threads says why).
        self.threads: int | None = None
        if self.device == "cpu":
            cores = int(self.pool.probe("cpu", self._scratch()).get("cpu_threads") or os.cpu_count() or 1)
            self.threads = cpu_timing_threads(cores)

    def start_ahead(self) -> Any:
        """Start the worker and warm the baselines for this reference in the background, so a
        session's first round finds both ready (a new session otherwise waits for the worker to
        import torch and for torch.compile to load its cached artifacts in a new process).
        Errors are left for the first round to report. Returns the thread doing it."""
        import threading

        def warm() -> None:
            try:
                prewarm = jobs.baselines_spec(
                    str(self.workspace.reference), self.device, self.threads, self.baselines, self._known_peaks()
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
        info = self.pool.probe(self.device, self._scratch())
        if self.device == "cuda":
            if not info.get("cuda_available"):
                raise EnvironmentMissing(
                    "--device cuda, but torch sees no CUDA GPU here",
                    "run on a machine with an NVIDIA GPU and a CUDA build of torch, or pass --device cpu",
                )
            if not _nvcc_present(self._env):
                raise EnvironmentMissing(
                    "--device cuda, but nvcc (the CUDA compiler) was not found",
                    "install the CUDA toolkit or set CUDA_HOME",
                )
        elif shutil.which("c++", path=self._env.get("PATH")) is None:
            raise EnvironmentMissing("no C++ compiler (c++) was found", "install g++ (e.g. apt-get install g++)")

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
        if not self.workspace.locked:
            return
        problems = self.workspace.lock_violations()
        result.checks.append(
            Check("lock", not problems, "; ".join(problems) if problems else "locked files match their recorded hashes")
        )
        if problems:
            result.errors.append("lock violation: " + "; ".join(problems))

    def _cpp_sources(self) -> dict[str, str]:
        """The kernel sources in kernels/, by the rule the build copies them with (KernelFiles): the
        static checks read exactly what gets compiled or included."""
        return KernelFiles.read(self.workspace.root).sources()

    def _static_check(self, result: HarnessResult, model_new: str) -> bool:
        from cuda_agent_cli.harness import static

        if not self.static_checks:
            return True
        findings = static.check_sources(model_new, self._cpp_sources(), self.policy)
        errors = [f for f in findings if f.severity == "error"]
        for f in findings:
            if f.severity != "error":
                result.warnings.append(f.to_detail())
        detail = "; ".join(f.to_detail() for f in errors[:6]) if errors else "no forbidden constructs found"
        if errors and self.policy == "strict":
            hybrid = static.errors(static.check_sources(model_new, self._cpp_sources(), "hybrid"))
            if not hybrid:
                detail += f" ({POLICY_ONLY})"
        result.checks.append(Check("static", not errors, detail))
        return not errors

    # -- compile ----------------------------------------------------------------------------

    def compile(self) -> HarnessResult:
        result = self._new_result()
        self._lock_check(result)
        if self.workspace.kind == "kernelbench" and not self._static_check(
            result, self.workspace.candidate.read_text(errors="replace")
        ):
            # Its build is its import: code the static checks refused is not run.
            result.reward = -1
            return result
        self._compile_into(result, self._new_run_dir())
        result.reward = -1 if not result.compiled or result.failed_checks() else None
        return result

    def _compile_into(self, result: HarnessResult, run_dir: Path) -> str | None:
        """Build the extension; returns the directory holding cuda_extension.so (None: no build)."""
        return self._collect_compile(result, self._submit_compile(result, run_dir))

    def _submit_compile(self, result: HarnessResult, run_dir: Path) -> tuple[Ticket, float] | None:
        if self.workspace.kind == "kernelbench":
            # load_inline builds while model_new.py is imported: that import, alone and confined
            # as the candidate's process is, builds into the folder the evaluation loads from.
            snapshot = run_dir / "inline-build" / "model_new.py"
            snapshot.parent.mkdir(parents=True, exist_ok=True)
            snapshot.write_text(self.workspace.candidate.read_text(errors="replace"))
            inline = jobs.inline_build_request(
                self.device, snapshot, self._inline_dir(), run_dir / "inline-build" / "out", self.confine_writes
            )
            Path(inline["out_dir"]).mkdir(parents=True, exist_ok=True)
            return (
                self.pool.submit("inline_build", inline, run_dir / "inline-build" / "job", self.compile_timeout),
                time.perf_counter(),
            )
        spec = jobs.compile_request(
            self.device,
            self.workspace.build_dir / self.device,
            self.workspace.binding_dir,
            self.workspace.kernels_dir,
            self._objects_dir(),
            self._pch_dir(),
        )
        return self.pool.submit("compile", spec, run_dir / "compile", self.compile_timeout), time.perf_counter()

    def _objects_dir(self) -> Path:
        """Where compiled objects are kept by content: the cache, or CUDA_AGENT_OBJECTS_DIR (a
        folder several caches share, such as a test suite's between its runs). An object's name
        is the digest of its source, headers, flags, compiler and torch build, so a shared folder
        never gives a build an object made from anything else."""
        shared = os.environ.get("CUDA_AGENT_OBJECTS_DIR")
        return (Path(shared) if shared else self._cache / "objects") / self.device

    def _inline_dir(self) -> Path:
        """Where a single-file candidate's load_inline builds its extensions: the workspace's own
        folder, or CUDA_AGENT_INLINE_DIR (a folder several workspaces share, such as a test suite's
        between its runs). torch names and rebuilds what is there by the extension's name and
        sources, as in its own default folder, so workspaces sharing one trust each other's
        candidates: a folder for one user's own runs, never across users. Each Python
        environment has a folder of its own there: torch's include paths are on a build's
        command line, so two environments in one folder rebuilt each other's extensions on every
        alternation (ninja sees the command change)."""
        shared = os.environ.get("CUDA_AGENT_INLINE_DIR")
        if not shared:
            return self.workspace.build_dir / f"inline-{self.device}"
        folder = Path(shared) / f"{self.device}-{environment_key()}"
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BadInput(
                f"CUDA_AGENT_INLINE_DIR={shared} cannot hold builds ({exc.strerror or exc})",
                "point it at a folder you can write, or unset it",
            ) from None
        return folder

    def _pch_dir(self) -> Path:
        """Where precompiled headers are kept: the cache, or CUDA_AGENT_PCH_DIR (a folder several
        caches share, such as a test run's or a CI image's)."""
        shared = os.environ.get("CUDA_AGENT_PCH_DIR")
        return (Path(shared) if shared else self._cache / "pch") / self.device

    def _build_pch(self) -> None:
        """Have torch/extension.h precompiled for this device's flags, at low priority while the
        session goes on (once per process; nobody waits for it): the builds after it compile
        each binding in about half the time."""
        folder = str(self._pch_dir())
        if folder in _PCH_STARTED:
            return
        _PCH_STARTED.add(folder)
        spec = jobs.pch_request(self.device, folder)
        self.pool.submit("pch", spec, self._cache / "pch-job" / self.device, self.compile_timeout, nice=10)

    def _collect_compile(self, result: HarnessResult, submitted: tuple[Ticket, float] | None) -> str | None:
        if submitted is None:
            return None
        ticket, start = submitted
        outcome = self.pool.wait(ticket)
        # The build's own time: other jobs may have been collected first while it ran.
        reported = (outcome.result or {}).get("seconds")
        result.stage_seconds["compile"] = (
            float(reported) if isinstance(reported, (int, float)) else time.perf_counter() - start
        )
        if not outcome.ok:
            detail = outcome.describe_failure()
            result.checks.append(Check("compile", False, detail))
            result.errors.append(detail)
            return None
        info = cast("wire.CompileResult", outcome.result or {})
        self.last_compile = info
        # Started once the round is over (see _finish), so it never shares the machine with the
        # first round's own timing.
        self._pch_wanted = info.get("pch") == "missing"
        result.compile_log = info.get("log")
        if not info.get("ok"):
            result.checks.append(Check("compile", False, info.get("errors") or "the build failed"))
            result.errors.append("compile failed")
            return None
        result.compiled = True
        if self.workspace.kind == "kernelbench":
            result.checks.append(
                Check(
                    "compile",
                    True,
                    f"model_new.py built its extension with load_inline "
                    f"({result.stage_seconds.get('compile', 0.0):.1f} s)",
                )
            )
            return None
        rebuilt = [r for r in info.get("rebuilt", []) if not r.endswith(".so")]
        result.checks.append(
            Check(
                "compile",
                True,
                f"built cuda_extension ({len(rebuilt)} object(s) rebuilt"
                f"{': ' + ', '.join(rebuilt) if rebuilt else ''})",
            )
        )
        return info.get("module_dir")

    # -- verify / profile -------------------------------------------------------------------

    def _new_run_dir(self) -> Path:
        # Private to this user: spec files, tensors and logs of one evaluation. Input and output
        # tensors of five seeds can reach gigabytes, so they go to memory when there is room.
        shm = Path("/dev/shm")
        base = None
        try:
            if shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > 8 * 2**30:
                base = str(shm)
        except OSError:
            base = None
        return Path(tempfile.mkdtemp(prefix="cuda-agent-run-", dir=base))

    def verify(self) -> HarnessResult:
        return self._evaluate(timed=False)

    def profile(self) -> HarnessResult:
        result = self._evaluate(timed=True)
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

    def _evaluate(self, timed: bool) -> HarnessResult:
        run_dir = self._new_run_dir()
        # The controller keeps this process off the timing core while a window is timed and
        # puts it back after; put back here too, should the controller have ended mid-window.
        affinity = _thread_affinities()
        try:
            return self._evaluate_in(run_dir, timed)
        finally:
            _restore_affinities(affinity)
            if not os.environ.get("CUDA_AGENT_KEEP_RUNS"):
                shutil.rmtree(run_dir, ignore_errors=True)

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
        static_ok = self._static_check(result, model_new)
        result.stage_seconds["static"] = time.perf_counter() - start
        if not static_ok or result.failed_checks():
            if self.workspace.kind == "kernelbench":
                result.compiled = True  # its build is its import: code the static checks refused is not run
            else:
                self._compile_into(result, run_dir)  # compiler errors are worth reporting too
            return self._finish(result)

        # The candidate runs from a snapshot: exactly the text that was checked.
        snapshot = run_dir / "model_new.py"
        snapshot.write_text(model_new)
        n_sets = SEEDS + (TIMED_SETS if timed else 0)
        seeds = [secrets.randbelow(2**31 - 2) for _ in range(n_sets)]
        dirs = {name: run_dir / name for name in ("tensors_in", "tensors_cand")}
        for d in dirs.values():
            d.mkdir(mode=0o700)
        go = run_dir / "go.json"
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
            extensions_dir=self._inline_dir(),
            writable=run_dir / "evaluate",
            confine_writes=self.confine_writes,
            threads=self.threads,
            checks=TIMED_CHECKS,
            one_in=DETECT_ONE_IN,
            detect=DETECT,
            call_timeout=self.timeout,
            go_file=go,
            go_timeout=self.compile_timeout + 60,
            baselines=self.baselines,
            peaks=self._known_peaks(),
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
        claims: wire.Claims = info.get("claims") or {}
        for c in claims.get("checks", []):
            result.checks.append(Check(c["name"], bool(c["passed"]), str(c["detail"])))
            if c["name"] == "compile" and not c["passed"]:
                result.compiled = False
        if (
            self.workspace.kind == "kernelbench"
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
                        f"the candidate process ran past its time limit "
                        f"({self.timeout:.0f} s for one request) and was killed",
                    )
                )
            else:
                how = (info.get("exits") or {}).get("candidate", "ended")
                tail = " | ".join(outcome.log_tail.strip().splitlines()[-4:])
                result.checks.append(
                    Check("crash", False, f"the candidate process {how}" + (f": {tail}" if tail else ""))
                )
        if info.get("strays"):
            result.checks.append(Check("processes", False, str(info.get("error", ""))))
        if info.get("forged_times"):
            result.checks.append(Check("harness_integrity", False, str(info.get("error", ""))))
        if info.get("device_contention"):
            result.checks.append(Check("device_contention", False, str(info.get("error", ""))))
        if info.get("stage") != "done":
            if "error" in info and not result.failed_checks():
                result.checks.append(Check("crash", False, str(info["error"])))
            return self._finish(result)

        start = time.perf_counter()
        judge = self._run(
            "judge",
            jobs.judge_request(
                spec,
                jobs.judged_calls(info),
                info.get("commits") or {},
                inputs.get("fingerprints") or [],
                self.atol,
                self.rtol,
            ),
            run_dir,
        )
        result.stage_seconds["judge"] = time.perf_counter() - start
        self._record_phases(result, "judge", judge.result)
        verdict = cast("wire.JudgeResult", judge.result or {})
        if judge.ok and verdict.get("reference_error"):
            raise WorkspaceError(
                f"the reference model failed on its own inputs: {verdict['reference_error']}",
                "fix model.py so Model(*get_init_inputs())(*get_inputs()) runs",
            )
        if not judge.ok:
            result.checks.append(Check("crash", False, f"judging the outputs failed: {judge.describe_failure()}"))
            return self._finish(result)
        for c in verdict.get("checks", []):
            result.checks.append(Check(c["name"], c["passed"], c["detail"]))

        kernel_sources = list(self._cpp_sources().values()) + [model_new]
        result.checks.append(
            extension_check.extension_kernel_check(
                self.device,
                int(claims.get("ext_calls", 0)),
                info.get("cuda_kernels"),
                extension_check.kernel_names_in_sources(kernel_sources),
                info.get("cuda_kernels_error"),
                ext_shares=[float(x) for x in claims.get("ext_shares") or [] if isinstance(x, (int, float))],
                policy=self.policy,
                library_calls=extension_check.library_calls_in_sources(kernel_sources),
            )
        )
        seen = extension_check.torch_kernels_check(self.device, self.policy, info.get("cuda_kernels"))
        if seen is not None:
            result.checks.append(seen)

        if timed and not result.failed_checks():
            self._time(result, info, claims, int(inputs.get("input_bytes", 0)))
        return self._finish(result, timed)

    def _build_and_prepare(
        self, result: HarnessResult, run_dir: Path, spec: wire.EvaluateRequest
    ) -> tuple[Ticket | None, wire.InputsResult]:
        """Build the extension while the inputs are made and (profile) the baselines prepare;
        returns the submitted evaluation (None: nothing to evaluate) and the input sets made."""
        timed = bool(spec["timed_sets"])
        # The build is submitted first: a fresh worker finishes its own warm-up beside it.
        compiling = self._submit_compile(result, run_dir)
        # The warm baselines get going at once (a no-op when they are warm already).
        prewarm = (
            self.pool.submit(
                "service",
                {},
                run_dir / "service",
                60,
                service=jobs.prewarm_request(self._baselines_service(), jobs.prewarm_spec(spec)),
            )
            if timed
            else None
        )
        # The sets are written by several jobs side by side (two on a small machine, up to one a
        # set on a large one): on a warm round making them is a long pole.
        n_sets = len(spec["seeds"])
        writers = max(2, min(n_sets, (os.cpu_count() or 2) // 2))
        halves = [list(range(k, n_sets, writers)) for k in range(writers)]
        tickets = [
            self.pool.submit(
                "inputs",
                jobs.inputs_request(spec, part),
                run_dir / f"inputs{k}",
                self.timeout,
                nice=_BESIDE_BUILD if compiling else 0,
            )
            for k, part in enumerate(halves)
            if part
        ]
        evaluating: Ticket | None = None
        go = Path(spec["go_file"])
        module_dir = None
        try:
            if prewarm is not None:
                self.pool.wait(prewarm)
            inputs = _merge_inputs([self.pool.wait(t) for t in tickets])
            result.phase_seconds["inputs.job"] = inputs.seconds
            if not inputs.ok:
                raise WorkspaceError(
                    f"the reference {self.workspace.reference} could not produce inputs: {inputs.describe_failure()}",
                    "fix model.py so Model(*get_init_inputs())(*get_inputs()) runs",
                )
            answer = inputs.result or {}
            if "error" in answer:
                raise WorkspaceError(
                    answer["error"],
                    "a reference needs class Model, get_inputs() and optionally get_init_inputs()",
                )
            made = cast("wire.InputsResult", answer)
            if timed:
                spec["timing"] = self._timing_plan(int(made.get("input_bytes", 0)))
            # How every call draws each input leaf anew, tried on the reference by the inputs job.
            spec["plan"] = made.get("plan")
            # Submitted now: on a profile the baselines (torch.compile included) prepare while the
            # extension still builds; the candidate's process starts only once `go` exists.
            evaluating = self.pool.submit(
                "evaluate",
                spec,
                run_dir / "evaluate",
                self.timeout * 3
                + self.compile_timeout
                + (self.compile_timeout if self.workspace.kind == "kernelbench" else 0),
                service=self._baselines_service() if timed else None,
            )
            module_dir = self._collect_compile(result, compiling)
            compiling = None
        finally:
            if compiling is not None:
                self.pool.wait(compiling[0])
            tmp = go.with_suffix(".tmp")
            tmp.write_text(json.dumps(jobs.build_done(bool(result.compiled), module_dir)))
            os.replace(tmp, go)
        if not result.compiled:
            self.pool.wait(evaluating)
            return None, made
        return evaluating, made

    def _baselines_service(self) -> wire.ServiceRequest:
        """The baselines service the worker keeps warm for this reference (jobs.service_key)."""
        return jobs.service_key(
            self.workspace.reference,
            self.device,
            self.threads,
            self.baselines,
            self._cache / "worker" / "baselines-service.log",
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

    @staticmethod
    def _record_phases(result: HarnessResult, job: str, info: dict[str, Any] | None) -> None:
        for name, seconds in ((info or {}).get("phases") or {}).items():
            if isinstance(seconds, (int, float)):
                result.phase_seconds[f"{job}.{name}"] = float(seconds)

    def _finish(self, result: HarnessResult, timed: bool = False) -> HarnessResult:
        if self._pch_wanted:
            self._pch_wanted = False
            # A build beside the session's later rounds would share the CPU with their timing:
            # only where cores are plenty (a small machine is given one: CUDA_AGENT_PCH_DIR).
            if (os.cpu_count() or 1) >= PCH_BACKGROUND_MIN_CORES:
                self._build_pch()
        failed = result.failed_checks()
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

    # -- timing -----------------------------------------------------------------------------

    def _time(self, result: HarnessResult, info: wire.EvaluateResult, claims: wire.Claims, input_bytes: int) -> None:
        window = info.get("timing")
        if not window or not (window.get("blocks") or {}).get("candidate"):
            result.checks.append(Check("crash", False, "the candidate produced no timings"))
            return
        blocks = window["blocks"]
        base_info = info.get("baselines_info")
        if base_info and "compile_error" in base_info:
            result.warnings.append(
                f"torch.compile baseline unavailable, eager time used instead: {str(base_info['compile_error'])[:200]}"
            )
        stats = clock_stats.side_by_side(blocks, bursts=window.get("bursts") or ())
        skipped = stats.detail.get("skipped_work") or []
        if skipped:
            result.checks.append(
                Check(
                    "harness_integrity",
                    False,
                    "part of the harness's work around each call was "
                    f"skipped in the candidate's process: {'; '.join(skipped)}",
                )
            )
        # Whether this round's baselines came from the warm service (rounds: how many it has timed).
        result.timing_detail = {
            **stats.detail,
            "baselines": window.get("baselines_ready") or {},
            "pinned_cpu": window.get("pinned_cpu"),
            "trusted_retries": window.get("trusted_retries") or [],
            "trusted_device_ratios": _device_ratios(blocks),
        }
        method = timing_method(
            self.device,
            int(window.get("trials", 0)),
            int(window.get("warmup", 0)),
            int(window.get("block", 0)),
            self.threads,
        )
        detection = info.get("detection")
        if detection and detection.get("checked"):
            checked = (
                f"{detection['checked']} of {detection['timed']} timed calls checked, chosen after they "
                f"returned (a kernel wrong on one call in {detection['one_in']} is caught with probability "
                f"{detection['probability']:.3f})"
            )
            burst = detection.get("bursts")
            if burst and burst.get("checked"):
                checked += (
                    f"; {stats.detail.get('burst_rounds')} bursts of {stats.detail.get('burst_calls')} "
                    f"back-to-back calls, {burst['checked']} of {burst['timed']} checked ({burst['probability']:.3f})"
                )
            head, sep, tail = method.rpartition("; median of")
            method = f"{head}; {checked}{sep}{tail}" if sep else f"{method}; {checked}"
            result.timing_detail["detection"] = detection
        result.timings = Timings(
            stats.eager_us,
            stats.compile_us,
            stats.candidate_us,
            stats.speedup_vs_eager,
            stats.speedup_vs_compile,
            method,
            stats.trials,
            speedup_vs_eager_interval=stats.eager_interval,
            speedup_vs_compile_interval=stats.compile_interval,
            uncertain=reward.uncertain(stats.eager_interval, self._reward_versus(stats).interval),
            baselines={
                side: {
                    "us": round(v.us, 3),
                    "speedup": round(v.speedup, 4),
                    "interval": [round(x, 4) for x in v.interval],
                }
                for side, v in stats.versus.items()
            },
            best_baseline=stats.best,
            speedup_vs_best=stats.versus[stats.best].speedup,
            speedup_vs_best_interval=stats.versus[stats.best].interval,
            reward_baseline=self.reward_baseline,
            **self._roofline(result, stats, base_info),
        )
        errors: dict[str, str] = (base_info.get("baseline_errors") or {}) if base_info else {}
        for side, why in errors.items():
            if side != "compile":  # said above, with eager standing in
                result.warnings.append(
                    f"{clock_stats.BASELINE_NAMES.get(side, side)} baseline unavailable, not timed: {str(why)[:200]}"
                )
        gap = float(stats.detail.get("idle_gap_us") or 0.0)
        escaped = sum(
            1 for b in blocks["candidate"] for t, e in zip(clock_stats.call_times(b, gap), b["events_us"]) if t != e
        )
        if escaped:
            result.warnings.append(
                f"speedup_review: in {escaped} timed call(s) the device stayed busy well past the "
                "kernel's own events (work on another stream?); the time until it was idle was used"
            )
        # Where the harness's clock had to overrule the kernel's claims, or cannot check them at
        # all, the claims decide nothing: the result is uncertain and its reward held at 1.
        held: list[str] = []
        if stats.clamped_blocks * 2 >= len(blocks["candidate"]):
            held.append(
                f"the kernel's own clock read less than the harness's clock allows in {stats.clamped_blocks} "
                f"of {len(blocks['candidate'])} blocks; the harness's bound was used"
            )
        if stats.detail.get("null_stalled"):
            held.append(
                "the candidate's process took far longer around calls that ran none of its code than the "
                "baselines' processes did; the baselines' overhead was used"
            )
        if stats.detail.get("below_resolution"):
            held.append(
                f"the harness's clock does not resolve this kernel: {stats.detail.get('outside_us')} us a call "
                f"beyond the harness's own work, against {stats.detail.get('resolution_us')} us it cannot tell "
                "apart, so the kernel's own claims cannot be checked"
            )
        for why in held:
            result.warnings.append(f"timing_bound: {why}; the reward is held at 1")
        if held:
            result.timing_detail["reward_held"] = True
            result.timings = dataclasses.replace(result.timings, uncertain=True)
        if base_info and base_info.get("recompiles_in_window"):
            result.warnings.append(
                f"torch.compile recompiled {base_info['recompiles_in_window']} time(s) while timed: "
                "its time may include compilation"
            )
        for label, cores in (("before", window.get("load_before")), ("during", window.get("load_during"))):
            if isinstance(cores, (int, float)) and cores > _LOAD_WARNING_CORES:
                result.warnings.append(
                    f"machine_load: other processes kept {cores:.1f} core(s) busy {label} the "
                    "timing window; the numbers may be off"
                )
        bandwidth = claims.get("bandwidth")
        floor = (input_bytes / bandwidth * 1e6) if bandwidth and input_bytes else None
        result.warnings.extend(
            review.review_warnings(stats.speedup_vs_eager, stats.speedup_vs_compile, stats.candidate_us, floor)
        )

    def _reward_versus(self, stats: clock_stats.SideBySide) -> clock_stats.Versus:
        """The baseline the reward's top step is decided against: default torch.compile (the
        paper's), or with --reward-baseline best the fastest baseline timed."""
        return stats.versus[stats.best if self.reward_baseline == "best" else "compile"]

    def _roofline(
        self, result: HarnessResult, stats: clock_stats.SideBySide, base_info: wire.BaselinesInfo | None
    ) -> dict[str, Any]:
        """The speed-of-light time and each side's fraction of it, where the baselines' process
        measured the reference's work; the machine's measured peaks are kept for later rounds."""
        peaks = base_info.get("peaks") if base_info else None
        work = base_info.get("work") if base_info else None
        if peaks and not self._known_peaks():
            self._peaks_file().parent.mkdir(parents=True, exist_ok=True)
            tmp = self._peaks_file().with_suffix(".tmp")
            tmp.write_text(json.dumps(peaks))
            os.replace(tmp, self._peaks_file())
        if not work or not work.get("flops") and not work.get("bytes"):
            return {}
        measured = cast("dict[str, float] | None", peaks or self._known_peaks())
        peak = roofline.device_peak(result.environment.get("gpu"), str(work.get("dtype")), measured)
        if peak is None:
            return {}
        times = {side: v.us for side, v in stats.versus.items()}
        times["candidate"] = stats.candidate_us
        line = roofline.roofline(work, peak, times)
        return {"roofline": line, "fraction_of_peak": line["fractions"].get("candidate")}

    def _peaks_file(self) -> Path:
        import platform

        key = hashlib.sha256(json.dumps([self.device, platform.node(), os.cpu_count()]).encode()).hexdigest()[:16]
        return self._cache / "machine" / f"peaks-{key}.json"

    def _known_peaks(self) -> dict[str, float] | None:
        """This machine's measured peaks, once a baselines' process has measured them."""
        try:
            data = json.loads(self._peaks_file().read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and data.get("bandwidth") else None


def _device_ratios(blocks: wire.SideBlocks) -> list[float]:
    """How disturbed the device was while the baselines were timed (CUDA), for the record: each
    of their blocks' lead-ins and flushes against their calibrated times (the larger median)."""
    return [
        float(b["device_ratio"])
        for side in (*clock_stats.BASELINES, "base_null")
        for b in blocks.get(side) or []
        if isinstance(b.get("device_ratio"), (int, float))
    ]


def _merge_inputs(outcomes: list[JobOutcome]) -> JobOutcome:
    """One outcome for the inputs jobs of an evaluation: the first failure, or every set's
    fingerprints in set order (set 0's description and size)."""
    for outcome in outcomes:
        if not outcome.ok or "error" in (outcome.result or {}):
            return outcome
    fingerprints: dict[int, Any] = {}
    first = outcomes[0].result or {}
    for outcome in outcomes:
        res = outcome.result or {}
        fingerprints.update(zip(res.get("indices", []), res.get("fingerprints", [])))
        if 0 in res.get("indices", []):
            first = res
    merged = {**first, "fingerprints": [fingerprints[i] for i in sorted(fingerprints)], "n": len(fingerprints)}
    return JobOutcome("inputs", "ok", merged, seconds=max(o.seconds for o in outcomes))


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


def timing_method(device: str, trials: int, warmup: int, block: int, threads: int | None) -> str:
    side = f"eager, torch.compile and the kernel interleaved in blocks of {block}, bounded by the harness's clock"
    if device == "cuda":  # the flush and the lead-in are tools/timing.py's FLUSH_BYTES and LEAD_US
        return (
            f"cuda-events+device-sync+l2flush(256MB)+no-persisting-l2+fresh-inputs+lead-in(300us); {side}; "
            f"median of {trials} after {warmup} warm-up"
        )
    # One thread: each call is timed by its thread's CPU time (tools/timing.py, Caller).
    clock = "thread-cpu-time" if threads == 1 else "perf_counter"
    # The sweep through 1.5x the last-level cache before calls whose inputs take half the L2 or
    # more: tools/timing.py's CPU_FLUSH_FACTOR and Caller.flush_from.
    return (
        f"{clock}+fresh-inputs+fixed-malloc-threshold+llc-sweep(inputs from half the L2), {threads} thread(s) "
        f"each side; {side}; "
        f"median of {trials} after {warmup} warm-up"
    )


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

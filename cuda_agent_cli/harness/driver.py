"""Harness: compile -> verify -> profile -> reward, driving the locked tools/ jobs in processes.

This process never imports model_new.py, the reference or torch: it orders the jobs, reads the
numbers they hand back through harness-owned files, computes the statistics and the reward.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_agent_cli import resources
from cuda_agent_cli.errors import BadInput, EnvironmentMissing, WorkspaceError
from cuda_agent_cli.harness import scoring
from cuda_agent_cli.harness.pool import JobOutcome, Ticket, WorkerPool, clean_env, shared_pool
from cuda_agent_cli.harness.result import Check, HarnessResult, Timings
from cuda_agent_cli.workspace import Workspace, cache_dir, external_workspace, pair_workspace

DEFAULT_TRIALS = {"cuda": (100, 10), "cpu": (20, 3)}  # (timed calls, warm-up calls)
SEEDS = 5
POLICIES = ("strict", "hybrid")
DEVICES = ("cuda", "cpu")


def _nvcc_present(env: dict[str, str]) -> bool:
    return shutil.which("nvcc", path=env.get("PATH")) is not None


# Timed calls whose outputs are checked. Chosen at random among the timed calls, so a
# candidate that caches or skips work is wrong on nearly all of them and 3 draws catch it; each
# check costs a saved output and a comparison, which is what a round pays for this defence.
TIMED_CHECKS = 3

# CPU priority of the inputs job, which runs beside a build and times nothing.
_BESIDE_BUILD = 10


@dataclass
class _PendingBaselines:
    ticket: Ticket
    go: Path  # created when the baselines may start timing


class Harness:
    """One workspace's trusted pipeline; cheap to call again and again from a long-lived process."""

    def __init__(self, workspace: Workspace, device: str | None = None, policy: str = "strict",
                 atol: float = 1e-2, rtol: float = 1e-2, trials: int | None = None,
                 warmup: int | None = None, timeout: float = 300.0, compile_timeout: float = 900.0,
                 confine_writes: bool = True) -> None:
        if policy not in POLICIES:
            raise BadInput(f"unknown policy {policy!r}", "use --policy strict or --policy hybrid")
        if device is not None and device not in DEVICES:
            raise BadInput(f"unknown device {device!r}", "use --device cuda or --device cpu")
        self.workspace = workspace
        self.policy = policy
        self.atol, self.rtol = float(atol), float(rtol)
        self.timeout, self.compile_timeout = timeout, compile_timeout
        # Landlock write confinement of the candidate's process, on both devices (the CUDA
        # driver's needs, its device nodes and JIT cache, stay writable). Off only to test the
        # layers behind it on their own.
        self.confine_writes = bool(confine_writes)
        self._cache = cache_dir()
        self._env = clean_env({
            "TORCHINDUCTOR_CACHE_DIR": str(self._cache / "inductor"),
            "TRITON_CACHE_DIR": str(self._cache / "triton"),
            # The torch.compile baseline builds beside the extension's build: a pool of one
            # compiler process per core (each importing torch) would starve nvcc.
            "TORCHINDUCTOR_COMPILE_THREADS": "1",
        })
        self.pool: WorkerPool = shared_pool(resources.tools_dir(), self._env, self._cache / "worker" / "worker.log")
        self.device = device or self._default_device()
        self._check_environment()
        default_trials, default_warmup = DEFAULT_TRIALS[self.device]
        self.trials = int(trials or default_trials)
        self.warmup = int(warmup if warmup is not None else default_warmup)
        self.last_compile: dict[str, Any] | None = None
        self._baseline_memo: dict[str, Any] | None = None
        self._baselines_read = False

    # -- environment ------------------------------------------------------------------------

    def _scratch(self) -> Path:
        path = self._cache / "worker"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _default_device(self) -> str:
        return "cuda" if self.pool.probe("cuda", self._scratch()).get("cuda_available") else "cpu"

    def _check_environment(self) -> None:
        info = self.pool.probe(self.device, self._scratch())
        if self.device == "cuda":
            if not info.get("cuda_available"):
                raise EnvironmentMissing("--device cuda, but torch sees no CUDA GPU here",
                                         "run on a machine with an NVIDIA GPU and a CUDA build of torch, or pass --device cpu")
            if not _nvcc_present(self._env):
                raise EnvironmentMissing("--device cuda, but nvcc (the CUDA compiler) was not found",
                                         "install the CUDA toolkit or set CUDA_HOME")
        elif shutil.which("c++", path=self._env.get("PATH")) is None:
            raise EnvironmentMissing("no C++ compiler (c++) was found", "install g++ (e.g. apt-get install g++)")

    def environment(self) -> dict[str, Any]:
        info = self.pool.probe(self.device, self._scratch())
        return {"gpu": info.get("gpu"), "torch": info.get("torch") or "", "cuda": info.get("cuda")}

    # -- helpers ----------------------------------------------------------------------------

    def _new_result(self) -> HarnessResult:
        return HarnessResult(compiled=False, correct=False, reward=-1, device=self.device,
                             policy=self.policy, environment=self.environment())

    def _run(self, job: str, spec: dict[str, Any], run_dir: Path, timeout: float | None = None) -> JobOutcome:
        return self.pool.run(job, spec, run_dir / job, timeout or self.timeout)

    def _lock_check(self, result: HarnessResult) -> None:
        if not self.workspace.locked:
            return
        problems = self.workspace.lock_violations()
        result.checks.append(Check("lock", not problems, "; ".join(problems) if problems
                                   else "locked files match their recorded hashes"))
        if problems:
            result.errors.append("lock violation: " + "; ".join(problems))

    def _cpp_sources(self) -> dict[str, str]:
        out: dict[str, str] = {}
        kdir = self.workspace.kernels_dir
        if kdir.is_dir():
            for p in sorted(kdir.iterdir()):
                if p.is_file() and p.suffix in {".cu", ".cpp", ".cc", ".cuh", ".h", ".hpp"}:
                    out[f"kernels/{p.name}"] = p.read_text(errors="replace")
        return out

    def _static_check(self, result: HarnessResult, model_new: str) -> bool:
        from cuda_agent_cli.harness import static_check

        findings = static_check.check_sources(model_new, self._cpp_sources(), self.policy)
        errors = [f for f in findings if f.severity == "error"]
        for f in findings:
            if f.severity != "error":
                result.warnings.append(f.to_detail())
        result.checks.append(Check("static", not errors, "; ".join(f.to_detail() for f in errors[:6])
                                   if errors else "no forbidden constructs found"))
        return not errors

    # -- compile ----------------------------------------------------------------------------

    def compile(self) -> HarnessResult:
        result = self._new_result()
        self._lock_check(result)
        self._compile_into(result, self._new_run_dir())
        result.reward = -1 if not result.compiled or result.failed_checks() else None
        return result

    def _compile_into(self, result: HarnessResult, run_dir: Path) -> str | None:
        """Build the extension; returns the directory holding cuda_extension.so (None: no build)."""
        return self._collect_compile(result, self._submit_compile(result, run_dir))

    def _submit_compile(self, result: HarnessResult, run_dir: Path) -> tuple[Ticket, float] | None:
        if self.workspace.kind == "kernelbench":
            result.compiled = True  # load_inline builds while model_new.py is imported
            return None
        spec = {
            "device": self.device,
            "build_dir": str(self.workspace.build_dir / self.device),
            "binding_dir": str(self.workspace.binding_dir),
            "kernels_dir": str(self.workspace.kernels_dir),
        }
        return self.pool.submit("compile", spec, run_dir / "compile", self.compile_timeout), time.perf_counter()

    def _collect_compile(self, result: HarnessResult, submitted: tuple[Ticket, float] | None) -> str | None:
        if submitted is None:
            return None
        ticket, start = submitted
        outcome = self.pool.wait(ticket)
        # The build's own time: other jobs may have been collected first while it ran.
        reported = (outcome.result or {}).get("seconds")
        result.stage_seconds["compile"] = float(reported) if isinstance(reported, (int, float)) \
            else time.perf_counter() - start
        if not outcome.ok:
            detail = outcome.describe_failure()
            result.checks.append(Check("compile", False, detail))
            result.errors.append(detail)
            return None
        info = outcome.result or {}
        self.last_compile = info
        result.compile_log = info.get("log")
        if not info.get("ok"):
            result.checks.append(Check("compile", False, info.get("errors") or "the build failed"))
            result.errors.append("compile failed")
            return None
        result.compiled = True
        rebuilt = [r for r in info.get("rebuilt", []) if not r.endswith(".so")]
        result.checks.append(Check("compile", True, f"built cuda_extension ({len(rebuilt)} object(s) rebuilt"
                                   f"{': ' + ', '.join(rebuilt) if rebuilt else ''})"))
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
        return self._evaluate(timed=True)

    def _evaluate(self, timed: bool) -> HarnessResult:
        run_dir = self._new_run_dir()
        try:
            return self._evaluate_in(run_dir, timed)
        finally:
            if not os.environ.get("CUDA_AGENT_KEEP_RUNS"):
                shutil.rmtree(run_dir, ignore_errors=True)

    def _evaluate_in(self, run_dir: Path, timed: bool) -> HarnessResult:
        self._cached_baselines()  # before this round's candidate can run
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
            self._compile_into(result, run_dir)  # compiler errors are worth reporting too
            return self._finish(result)

        # The candidate runs from a snapshot: exactly the text that was checked.
        snapshot = run_dir / "model_new.py"
        snapshot.write_text(model_new)
        seeds = [secrets.randbelow(2**31 - 2) for _ in range(SEEDS)]
        dirs = {name: run_dir / name for name in ("tensors_in", "tensors_cand")}
        for d in dirs.values():
            d.mkdir(mode=0o700)

        module_dir, inputs, base_record = self._build_and_prepare(result, run_dir, seeds, dirs["tensors_in"], timed)
        if not result.compiled:
            return self._finish(result)

        rng = secrets.SystemRandom()
        save_at = sorted(rng.sample(range(self.trials), min(TIMED_CHECKS, self.trials))) if timed else []
        order = [rng.randrange(len(seeds)) for _ in range(self.trials)]
        scales = [round(rng.uniform(0.9, 1.1), 6) for _ in range(self.trials)]
        cand_spec = {
            "device": self.device, "policy": self.policy, "candidate": str(snapshot),
            "module_dir": module_dir, "inputs_dir": str(dirs["tensors_in"]), "out_dir": str(dirs["tensors_cand"]),
            "n": len(seeds), "seeds": seeds,
            "extensions_dir": str(self.workspace.build_dir / f"inline-{self.device}"),
            "writable": [str(run_dir / "candidate")],
            "confine_writes": self.confine_writes,
            "timing": {"trials": self.trials, "warmup": self.warmup, "save_at": save_at, "order": order,
                       "scales": scales} if timed else None,
        }
        start = time.perf_counter()
        timeout = self.timeout + (self.compile_timeout if self.workspace.kind == "kernelbench" else 0)
        cand = self._run("candidate", cand_spec, run_dir, timeout=timeout)
        result.stage_seconds["candidate"] = time.perf_counter() - start
        self._record_phases(result, "candidate", cand.result)
        if not cand.ok:
            name = "timeout" if cand.status == "timeout" else "crash"
            detail = cand.describe_failure()
            result.checks.append(Check(name, False, detail))
            result.errors.append(detail)
            return self._finish(result)
        info = cand.result or {}
        for c in info.get("checks", []):
            result.checks.append(Check(c["name"], c["passed"], c["detail"]))
            if c["name"] == "compile" and not c["passed"]:
                result.compiled = False
        if self.workspace.kind == "kernelbench" and result.compiled and info.get("stage") != "import":
            result.checks.insert(len(result.checks) - len(info.get("checks", [])),
                                 Check("compile", True, "model_new.py built its extension with load_inline"))
        # Recorded where it took effect; `cuda-agent doctor` says when the kernel cannot do it.
        confinement = str(info.get("write_confinement") or "")
        if confinement.startswith("Landlock"):
            result.checks.append(Check("write_confinement", True, confinement))
        if info.get("stage") != "done":
            return self._finish(result)

        start = time.perf_counter()
        judge = self._run("judge", {"reference": str(self.workspace.reference), "device": self.device,
                                    "inputs_dir": str(dirs["tensors_in"]), "cand_dir": str(dirs["tensors_cand"]),
                                    "n": len(seeds), "seeds": seeds, "atol": self.atol, "rtol": self.rtol,
                                    "evidence": info.get("evidence") or [],
                                    "fingerprints": (inputs.result or {}).get("fingerprints") or [],
                                    "timed": [[i, order[i], scales[i]] for i in save_at]}, run_dir)
        result.stage_seconds["judge"] = time.perf_counter() - start
        self._record_phases(result, "judge", judge.result)
        if judge.ok and (judge.result or {}).get("reference_error"):
            raise WorkspaceError(f"the reference model failed on its own inputs: {judge.result['reference_error']}",
                                 "fix model.py so Model(*get_init_inputs())(*get_inputs()) runs")
        if not judge.ok:
            result.checks.append(Check("crash", False, f"judging the outputs failed: {judge.describe_failure()}"))
            return self._finish(result)
        for c in (judge.result or {}).get("checks", []):
            result.checks.append(Check(c["name"], c["passed"], c["detail"]))

        kernel_sources = list(self._cpp_sources().values()) + [model_new]
        result.checks.append(scoring.extension_kernel_check(
            self.device, int(info.get("ext_calls", 0)), info.get("cuda_kernels"),
            scoring.kernel_names_in_sources(kernel_sources), info.get("cuda_kernels_error")))

        if timed and not result.failed_checks():
            self._time(result, info, int((inputs.result or {}).get("input_bytes", 0)), base_record)
        return self._finish(result, timed)

    def _build_and_prepare(self, result: HarnessResult, run_dir: Path, seeds: list[int], inputs_dir: Path,
                           timed: bool) -> tuple[str | None, JobOutcome, dict[str, Any] | None]:
        """Build the extension while the inputs are made (and, on a first profile, while the
        baselines prepare); returns the module dir, the inputs job and, when timed, the baselines."""
        # The build is submitted first: a fresh worker finishes its own warm-up beside it.
        compiling = self._submit_compile(result, run_dir)
        inputs_ticket = self.pool.submit("inputs", {"reference": str(self.workspace.reference), "device": self.device,
                                                    "seeds": seeds, "out_dir": str(inputs_dir)},
                                         run_dir / "inputs", self.timeout, nice=_BESIDE_BUILD if compiling else 0)
        baselines: _PendingBaselines | None = None
        base_record: dict[str, Any] | None = None
        try:
            inputs = self.pool.wait(inputs_ticket)
            if timed and inputs.ok and "error" not in (inputs.result or {}):
                baselines = self._submit_baselines(run_dir, seeds[0], inputs_dir, len(seeds))
                if baselines is None:
                    base_record = self._cached_baselines()
                    result.stage_seconds["baselines (cached)"] = 0.0
            module_dir = self._collect_compile(result, compiling)
            compiled_at = time.perf_counter()
        finally:
            if baselines is not None:
                # Timing starts only now, on an otherwise idle machine, and is cached for later rounds.
                base_record = self._collect_baselines(baselines)
        result.phase_seconds["inputs.job"] = inputs.seconds
        if not inputs.ok:
            raise WorkspaceError(f"the reference {self.workspace.reference} could not produce inputs: "
                                 f"{inputs.describe_failure()}", "fix model.py so Model(*get_init_inputs())(*get_inputs()) runs")
        if "error" in (inputs.result or {}):
            raise WorkspaceError(inputs.result["error"], "a reference needs class Model, get_inputs() and optionally get_init_inputs()")
        if baselines is not None:
            result.stage_seconds["baselines (after compile)"] = time.perf_counter() - compiled_at
        return module_dir, inputs, base_record

    @staticmethod
    def _record_phases(result: HarnessResult, job: str, info: dict[str, Any] | None) -> None:
        for name, seconds in ((info or {}).get("phases") or {}).items():
            if isinstance(seconds, (int, float)):
                result.phase_seconds[f"{job}.{name}"] = float(seconds)

    def _finish(self, result: HarnessResult, timed: bool = False) -> HarnessResult:
        failed = result.failed_checks()
        result.correct = result.compiled and not failed and any(c.name == "correctness" for c in result.checks)
        for c in failed:
            line = f"{c.name}: {c.detail.splitlines()[0] if c.detail else ''}"
            if line not in result.errors and not any(e.startswith(c.name) for e in result.errors):
                result.errors.append(line)
        if not result.correct:
            result.reward = -1
        elif result.timings is not None:
            t = result.timings
            result.reward = scoring.reward_for(True, t.speedup_vs_eager, t.speedup_vs_compile)
        else:
            result.reward = None
        return result

    # -- timing -----------------------------------------------------------------------------

    def _baseline_key(self) -> str:
        env = self.environment()
        parts = [hashlib.sha256(self.workspace.reference.read_bytes()).hexdigest(), self.device,
                 env.get("torch") or "", env.get("gpu") or "", str(self.trials), str(self.warmup), "v3"]
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]

    def _baseline_path(self) -> Path:
        return self._cache / "baselines" / f"{self._baseline_key()}.json"

    def _cached_baselines(self) -> dict[str, Any] | None:
        # Read once per Harness, before any candidate of it has run, and kept in memory: a
        # candidate that writes the user's files cannot move the baselines of later rounds, not
        # even by creating the file when there was none.
        if not self._baselines_read:
            self._baselines_read = True
            path = self._baseline_path()
            try:
                self._baseline_memo = json.loads(path.read_text()) if path.is_file() else None
            except (OSError, json.JSONDecodeError):
                self._baseline_memo = None
        return self._baseline_memo

    def _submit_baselines(self, run_dir: Path, seed: int, inputs_dir: Path, n_sets: int) -> _PendingBaselines | None:
        """Start the baselines job unless cached; it prepares (torch.compile included) right away
        but times only once `_collect_baselines` says the machine is otherwise idle."""
        if self._cached_baselines() is not None:
            return None
        go = run_dir / "baselines-go"
        rng = secrets.SystemRandom()
        spec = {"reference": str(self.workspace.reference), "device": self.device, "inputs_dir": str(inputs_dir),
                "seed": seed, "trials": self.trials, "warmup": self.warmup, "n": n_sets, "go_file": str(go),
                "order": [rng.randrange(n_sets) for _ in range(self.trials)],
                "scales": [round(rng.uniform(0.9, 1.1), 6) for _ in range(self.trials)]}
        # Not niced although it prepares beside the build: its timing must run at the same
        # priority as the candidate's, or a busy machine would slow the baselines more.
        return _PendingBaselines(self.pool.submit("baselines", spec, run_dir / "baselines", self.compile_timeout), go)

    def _collect_baselines(self, pending: _PendingBaselines) -> dict[str, Any]:
        """The record (also cached), or {"error": why} when timing the reference failed."""
        pending.go.touch()
        outcome = self.pool.wait(pending.ticket)
        if not outcome.ok:
            return {"error": outcome.describe_failure(), "seconds": outcome.seconds}
        raw = outcome.result or {}
        eager_us = scoring.median_us(raw["eager"]["times_us"])
        record: dict[str, Any] = {"eager_us": eager_us, "method": raw["eager"]["method"]}
        if "compile" in raw:
            record["compile_us"] = scoring.median_us(raw["compile"]["times_us"])
        else:
            record["compile_us"] = eager_us
            record["compile_error"] = raw.get("compile_error", "torch.compile failed")
        path = self._baseline_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record))
        os.replace(tmp, path)
        self._baseline_memo = record
        return {**record, "seconds": outcome.seconds}

    def _time(self, result: HarnessResult, cand: dict[str, Any], input_bytes: int, base: dict[str, Any]) -> None:
        measured = cand.get("timing") or {}
        times = measured.get("times_us") or []
        if not times:
            result.checks.append(Check("crash", False, "the candidate produced no timings"))
            return
        if "seconds" in base:
            result.phase_seconds["baselines.job"] = float(base["seconds"])
        if "error" in base:
            raise WorkspaceError(f"timing the reference failed: {base['error']}",
                                 "make sure the reference runs on this device")
        if "compile_error" in base:
            result.warnings.append(f"torch.compile baseline unavailable, eager time used instead: {base['compile_error'][:200]}")
        cand_us = scoring.median_us(times)
        eager_us, compile_us = float(base["eager_us"]), float(base["compile_us"])
        result.timings = Timings(eager_us, compile_us, cand_us, eager_us / cand_us, compile_us / cand_us,
                                 measured.get("method", ""), len(times))
        bandwidth = cand.get("bandwidth")
        floor = (input_bytes / bandwidth * 1e6) if bandwidth and input_bytes else None
        wall = measured.get("wall_us") or None
        result.warnings.extend(scoring.review_warnings(
            eager_us / cand_us, compile_us / cand_us, cand_us, floor,
            scoring.median_us(wall) if wall and self.device == "cuda" else None, cand_us))


# -- entry points for `cuda-agent verify|profile` -------------------------------------------------

def _validate_reference(ws: Workspace) -> None:
    problems = scoring.reference_problems(ws.reference.read_text(errors="replace"), ws.reference.name)
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


def verify_path(path: Path | None = None, *, ref: Path | None = None, candidate: Path | None = None,
                **options: Any) -> HarnessResult:
    return Harness(open_path(path, ref, candidate), **options).verify()


def profile_path(path: Path | None = None, *, ref: Path | None = None, candidate: Path | None = None,
                 **options: Any) -> HarnessResult:
    return Harness(open_path(path, ref, candidate), **options).profile()

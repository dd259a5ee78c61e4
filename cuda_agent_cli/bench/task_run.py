"""One task of a bench, start to end: score its candidates (or let the agent make one), one record.

`run_task(job)` takes and returns plain JSON-able dicts, so the same function runs in a local
slot process, in a Ray worker, or in this process. It never writes outside the job's `work`
folder (under --out) and the session store the harness and the agent own; a candidate's files
are copied there first, so nothing in a solutions folder is ever built in place or written.
"""

from __future__ import annotations

import shutil
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from cuda_agent_cli.bench.solutions import sample_files
from cuda_agent_cli.errors import CudaAgentError, EnvironmentMissing, Interrupted

if TYPE_CHECKING:
    from cuda_agent_cli.config import Config
    from cuda_agent_cli.harness import Harness
    from cuda_agent_cli.harness_result import HarnessResult

BINDING_FILES = ("binding.cpp", "binding_registry.h")


def rank(result: HarnessResult) -> tuple[float, float, float, float]:
    """Best first when sorted descending: correct, reward, speedup vs compile, speedup vs eager."""
    t = result.timings
    return (
        1.0 if result.correct else 0.0,
        float(result.reward) if result.reward is not None else 0.0,
        t.speedup_vs_compile if t else 0.0,
        t.speedup_vs_eager if t else 0.0,
    )


def sample_folder(job: dict[str, Any], sample: dict[str, Any]) -> Path:
    """Where a sample of the job is put together and built: the same path for the compile-ahead
    worker and the slot, since the harness's build directory is keyed on it."""
    return Path(job["work"]) / f"sample_{sample['index']}"


def materialize(folder: Path, reference: str, files: dict[str, bytes]) -> Path:
    """folder/{model.py, model_new.py, kernels/, binding files}: the suite's reference, the
    candidate's own files, and the package's pristine binding files when it has kernels/.

    Files whose content is already right are left alone, and anything else in the folder is
    removed: a rerun finds the same folder (its build cache is keyed on the path) unchanged."""
    from cuda_agent_cli.resources import sandbox_template_dir

    wanted: dict[str, bytes] = {"model.py": reference.encode(), **files}
    if any(rel.startswith("kernels/") for rel in files):
        template = sandbox_template_dir()
        for name in BINDING_FILES:
            wanted[name] = (template / name).read_bytes()
    folder.mkdir(parents=True, exist_ok=True)
    for p in sorted(folder.rglob("*"), reverse=True):
        rel = p.relative_to(folder).as_posix()
        if p.is_symlink() or (p.is_file() and rel not in wanted):
            p.unlink()
        elif p.is_dir() and not any(w.startswith(rel + "/") for w in wanted):
            shutil.rmtree(p)
    for rel, data in wanted.items():
        dest = folder / rel
        if dest.is_file() and dest.read_bytes() == data:
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
    return folder


def phase_seconds(result: HarnessResult, round_s: float | None = None) -> dict[str, float]:
    """Where a scoring round's time went, as the harness timed it: its stages (static, compile,
    candidate, judge) and the phases inside its jobs ("inputs.job", "candidate.baselines_wait",
    "candidate.timing", ...), with the whole round as "round" when the bench timed it."""
    seconds = {**result.stage_seconds, **result.phase_seconds}
    if round_s is not None:
        seconds["round"] = round_s
    return {k: round(float(v), 3) for k, v in seconds.items()}


def _sample_entry(index: int, result: HarnessResult, round_s: float | None = None) -> dict[str, Any]:
    # The record keeps the numbers as the harness result's JSON object rounds them.
    t = result.to_json()["timings"] or {}
    return {
        "sample": index,
        "compiled": result.compiled,
        "correct": result.correct,
        "reward": result.reward,
        "speedup_vs_eager": t.get("speedup_vs_eager"),
        "speedup_vs_compile": t.get("speedup_vs_compile"),
        "speedup_vs_best": t.get("speedup_vs_best"),
        "fraction_of_peak": t.get("fraction_of_peak"),
        "uncertain": t.get("uncertain"),
        "failed_checks": [c.name for c in result.failed_checks()],
        "errors": [e[:300] for e in result.errors][:5],
        "warnings": list(result.warnings),
        "seconds": phase_seconds(result, round_s),
    }


def score(folder: Path, job: dict[str, Any]) -> HarnessResult:
    """One harness round (verify, then time) of the candidate in `folder`."""
    from cuda_agent_cli.harness import profile_path

    options: dict[str, Any] = {"device": job.get("device"), "policy": job.get("policy") or "strict"}
    for key in ("atol", "rtol", "trials", "reward_baseline", "precision"):
        if job.get(key) is not None:
            options[key] = job[key]
    with _device_busy(job):
        return profile_path(folder, **options)


@contextmanager
def _device_busy(job: dict[str, Any]) -> Iterator[None]:
    """Times one scoring round: its seconds add up in `harness_s`, and its wall-clock span is one
    of the task's `device_busy` intervals (the slot's device held for this task's round)."""
    start, wall = time.perf_counter(), time.time()
    try:
        yield
    finally:
        job["_harness_s"] = job.get("_harness_s", 0.0) + time.perf_counter() - start
        job.setdefault("_busy", []).append([round(wall, 3), round(time.time(), 3)])


def _base_record(job: dict[str, Any]) -> dict[str, Any]:
    task = job["task"]
    return {
        "task": task["key"],
        "level": task["level"],
        "problem_id": task["problem_id"],
        "name": task["name"],
        "task_sha256": task["sha256"],
        "origin": task["origin"],
        "mode": job["mode"],
        "gpu": job.get("gpu"),
        "solutions_sha256": job.get("solutions_sha256"),
        "device": job.get("device"),
        "policy": job.get("policy") or "strict",
        "status": "failed",
        "error": None,
        "correct": False,
        "reward": -1,
        "speedup_vs_eager": None,
        "speedup_vs_compile": None,
        "speedup_vs_best": None,
        "speedup_vs_best_interval": None,
        "best_baseline": None,
        "baselines": None,
        "fraction_of_peak": None,
        "roofline": None,
        "samples": [],
        "n_samples": 0,
        "n_correct": 0,
        "best_sample": None,
        "pass_at_k": {},
        "warnings": [],
        "best": None,
        "cost_usd": None,
        "tokens": None,
        "turns": None,
        "stop_reason": None,
        "session_id": None,
    }


def _settle(
    record: dict[str, Any], results: list[tuple[int, HarnessResult]], rounds: dict[int, float] | None = None
) -> None:
    """Fill in the samples, pass@k and the best sample's verdict from the scored candidates
    (`rounds`: each sample's round in seconds, as the bench timed it)."""
    from cuda_agent_cli.bench.metrics import pass_at_k

    record["samples"] = [_sample_entry(i, r, (rounds or {}).get(i)) for i, r in results]
    n, c = len(results), sum(1 for _, r in results if r.correct)
    record["n_samples"], record["n_correct"] = n, c
    record["pass_at_k"] = {str(k): pass_at_k(n, c, k) for k in sorted({1, n})} if n else {}
    if not results:
        return
    index, best = max(results, key=lambda ir: rank(ir[1]))
    as_json = best.to_json()
    t = as_json["timings"] or {}
    record.update(
        best_sample=index,
        best=as_json,
        correct=best.correct,
        reward=best.reward,
        speedup_vs_eager=t.get("speedup_vs_eager"),
        speedup_vs_compile=t.get("speedup_vs_compile"),
        speedup_vs_best=t.get("speedup_vs_best"),
        speedup_vs_best_interval=t.get("speedup_vs_best_interval"),
        best_baseline=t.get("best_baseline"),
        baselines=t.get("baselines"),
        fraction_of_peak=t.get("fraction_of_peak"),
        roofline=_roofline_row(t.get("roofline")),
        warnings=list(best.warnings),
        # Verified but not timed: another program kept the GPU busy (never a failure of the kernel).
        status="not_measured" if best.not_measured else "correct" if best.correct else "failed",
        precision=best.precision,
    )
    if best.not_measured:
        record["not_measured"] = best.not_measured
    if not best.correct:
        from cuda_agent_cli.harness.verdict import POLICY_ONLY

        checks = best.failed_checks()
        failed = [c.name for c in checks]
        # The first failed check's own words too: a name alone does not say what to fix.
        why = f": {' '.join(checks[0].detail.split())[:240]}" if checks and checks[0].detail else ""
        record["error"] = "no sample is correct" + (f" (best failed: {', '.join(failed[:4])}){why}" if failed else "")
        if POLICY_ONLY in best.errors:
            record["error"] = f"{POLICY_ONLY}: {', '.join(failed[:4])}"
            record["rejected_by_policy"] = True


def _roofline_row(line: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the report's roofline needs of a result's: the work, the bound and every side's
    fraction of the speed-of-light time."""
    if not isinstance(line, dict):
        return None
    keys = ("sol_us", "flops", "bytes", "dtype", "intensity", "bound", "peak_flops", "bandwidth", "peak_source")
    return {**{k: line.get(k) for k in keys}, "fractions": dict(line.get("fractions") or {})}


def _run_solutions(job: dict[str, Any], record: dict[str, Any]) -> None:
    samples = job.get("samples") or []
    if not samples:
        record["error"] = "no candidate for this task in the solutions folder"
        return
    results, rounds = [], {}
    for s in samples:
        start = time.perf_counter()
        folder = materialize(sample_folder(job, s), job["task"]["source"], sample_files(s))
        results.append((int(s["index"]), score(folder, job)))
        rounds[int(s["index"])] = round(time.perf_counter() - start, 3)
    _settle(record, results, rounds)


class _Usage:
    """Event sink that adds up the tokens of every paid turn."""

    def __init__(self) -> None:
        self.tokens = 0

    def __call__(self, event: Any) -> None:
        if getattr(event, "kind", "") == "cost":
            self.tokens += int(event.prompt_tokens or 0) + int(event.completion_tokens or 0)


def model_for(job: dict[str, Any]) -> str:
    """`replay:DIR` gives each task its own recorded session: DIR/<task key with / as __>.jsonl."""
    model = job["model"]
    if model.startswith("replay:"):
        folder = Path(model.split(":", 1)[1]).expanduser()
        if folder.is_dir():
            name = job["task"]["key"].replace("/", "__") + ".jsonl"
            return f"replay:{folder / name}"
    return model


SESSION_SETTINGS = (
    "model",
    "api_base",
    "device",
    "policy",
    "max_turns",
    "max_cost",
    "timeout",
    "atol",
    "rtol",
    "precision",
)


def session_config(job: dict[str, Any]) -> Config:
    """The settings of a task's session, as the bench's own flags gave them (the job's values of
    SESSION_SETTINGS): no config file or environment is read, so a task runs the same in a slot,
    a Ray worker or this process."""
    from cuda_agent_cli.config import Config, Settings

    given = {name: job[name] for name in SESSION_SETTINGS if job.get(name) is not None}
    return Config(Settings(**given), {name: "flag" for name in given})


def _run_agent(job: dict[str, Any], record: dict[str, Any]) -> None:
    """The agent on the task, one session through the session runner, in the bench's own session
    store under --out; its best candidate is then scored anew by the bench."""
    from cuda_agent_cli.run.optimize import GivenReference, OptimizeRequest, run_optimize

    task = job["task"]
    usage = _Usage()
    outcome = run_optimize(
        OptimizeRequest(
            target=None,
            cwd=Path(job["work"]),
            reference=GivenReference(task["key"], task["source"]),
            config=session_config({**job, "model": model_for(job)}),
            trials=job.get("trials"),
            allow_unsafe=bool(job.get("allow_unsafe")),
            command="bench",
        ),
        sink=usage,
        data_dir=Path(job["sessions"]),
    )
    record.update(
        session_id=outcome.session_id,
        turns=outcome.turns,
        cost_usd=outcome.cost_usd,
        tokens=usage.tokens,
        stop_reason=outcome.stop_reason,
        n_samples=0,
    )
    best = outcome.result
    if best is None or outcome.best_dir is None or outcome.harness is None or not best.correct:
        record["error"] = f"the agent found no correct candidate (stopped: {outcome.stop_reason})"
        record["n_samples"] = 1
        record["pass_at_k"] = {"1": 0.0}
        return
    _settle(record, [(0, _score_best(job, outcome.harness, outcome.best_dir))])


def _score_best(job: dict[str, Any], harness: Harness, best_dir: Path) -> HarnessResult:
    """The best snapshot back in the session's workspace, then one profile round (verify, then
    time) with the session's own harness, so its build is reused."""
    from cuda_agent_cli.kernel_files import KernelFiles

    KernelFiles.read(best_dir).write(harness.workspace.root)
    with _device_busy(job):
        return harness.profile()


_warmed = False


def _warm_once() -> None:
    """Before this process's first task: its harness worker imports torch.compile once, for all
    the references it will score (each reference's baselines would import it again)."""
    global _warmed
    if not _warmed:
        _warmed = True
        from cuda_agent_cli.harness import warm_worker

        warm_worker()


def run_task(job: dict[str, Any]) -> dict[str, Any]:
    """The task's record; an environment problem comes back as {"fatal": ...} for the run to stop on."""
    start, held = time.perf_counter(), time.time()
    record = _base_record(job)
    task = job["task"]
    try:
        if task.get("error"):
            record.update(status="error", error=task["error"])
        else:
            _warm_once()
            (_run_agent if job["mode"] == "agent" else _run_solutions)(job, record)
    except (KeyboardInterrupt, Interrupted):
        raise
    except EnvironmentMissing as exc:
        return {"fatal": {"exit": exc.exit_code, "message": exc.one_line()}, "task": task["key"]}
    except CudaAgentError as exc:
        record.update(status="error", error=exc.one_line(), correct=False, reward=-1)
    except Exception as exc:  # one broken task must not stop a suite: it is that task's error
        record.update(status="error", error=f"internal error: {type(exc).__name__}: {exc}", correct=False, reward=-1)
    record["wall_s"] = round(time.perf_counter() - start, 3)
    # The bench's scoring rounds only (the agent's own rounds are inside its session's time).
    record["harness_s"] = round(job.get("_harness_s", 0.0), 3)
    # Wall-clock spans (epoch seconds, comparable across processes and nodes): the whole task,
    # and its scoring rounds, from which a run's device-busy fraction follows.
    record["held"] = [round(held, 3), round(time.time(), 3)]
    record["device_busy"] = job.get("_busy", [])
    record["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return record

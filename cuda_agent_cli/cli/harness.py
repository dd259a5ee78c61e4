"""`cuda-agent verify PATH` and `cuda-agent profile PATH` (also --ref FILE --candidate FILE)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from cuda_agent_cli.cli.options import DeviceOpt, JsonOpt, PolicyOpt, PrecisionOpt, RewardBaselineOpt, TrialsOpt

if TYPE_CHECKING:
    from cuda_agent_cli.harness_result import HarnessResult

PathArg = Annotated[
    Optional[Path],
    typer.Argument(help="A directory with model.py and model_new.py (CUDA-Agent workdir or KernelBench pair)."),
]
RefOpt = Annotated[Optional[Path], typer.Option("--ref", help="The reference file (class Model, get_inputs).")]
CandOpt = Annotated[Optional[Path], typer.Option("--candidate", help="The candidate file (class ModelNew).")]
AtolOpt = Annotated[
    Optional[float], typer.Option("--atol", help="Absolute tolerance of the element-wise check (default 1e-2).")
]
RtolOpt = Annotated[
    Optional[float], typer.Option("--rtol", help="Relative tolerance of the element-wise check (default 1e-2).")
]
RepeatOpt = Annotated[
    int, typer.Option("--repeat", min=1, help="Profile N times, independently; report the median and range.")
]


def _run(
    timed: bool,
    path: Path | None,
    ref: Path | None,
    candidate: Path | None,
    device: str | None,
    policy: str | None,
    atol: float | None,
    rtol: float | None,
    trials: int | None,
    repeat: int = 1,
    reward_baseline: str | None = None,
    precision: str | None = None,
) -> list["HarnessResult"]:
    from cuda_agent_cli.config import load_config
    from cuda_agent_cli.harness import Harness, open_path
    from cuda_agent_cli.machine import pick_device

    cfg = load_config(
        {
            "device": device,
            "policy": policy,
            "atol": atol,
            "rtol": rtol,
            "reward_baseline": reward_baseline,
            "precision": precision,
        }
    )
    workspace = open_path(path, ref, candidate)
    harness = Harness(
        workspace,
        device=pick_device(cfg.device),
        policy=cfg.policy,
        atol=cfg.atol,
        rtol=cfg.rtol,
        trials=trials,
        reward_baseline=cfg.reward_baseline,
        precision=cfg.precision,
    )
    if not timed:
        return [harness.verify()]
    return [harness.profile() for _ in range(repeat)]


def _spread(values: list[float]) -> dict[str, float | list[float]]:
    import statistics

    return {
        "median": round(statistics.median(values), 4),
        "min": round(min(values), 4),
        "max": round(max(values), 4),
        "values": [round(v, 4) for v in values],
    }


def _repeat_summary(results: list["HarnessResult"]) -> dict[str, object]:
    """Median and range of each figure over independent profiles (timed ones only)."""
    timed = [r.timings for r in results if r.timings is not None]
    out: dict[str, object] = {"n": len(results), "rewards": [r.reward for r in results]}
    if timed:
        for key in ("speedup_vs_eager", "speedup_vs_compile", "candidate_us", "eager_us", "compile_us"):
            out[key] = _spread([float(getattr(t, key)) for t in timed])
        best = [t.speedup_vs_best for t in timed if t.speedup_vs_best is not None]
        if len(best) == len(timed):
            out["speedup_vs_best"] = _spread([float(b) for b in best])
    return out


def _median_result(results: list["HarnessResult"]) -> "HarnessResult":
    timed = sorted((r for r in results if r.timings is not None), key=lambda r: r.timings.speedup_vs_eager)  # type: ignore[union-attr]
    if len(timed) != len(results) or not timed:
        return next((r for r in results if not r.correct), results[-1])
    return timed[(len(timed) - 1) // 2]


def _print_human(result: "HarnessResult", what: str) -> None:
    env = result.environment
    where = env.get("gpu") or "cpu"
    typer.echo(f"{what} on {where} (device {result.device}, policy {result.policy}, torch {env.get('torch')})")
    width = max((len(c.name) for c in result.checks), default=8)
    for c in result.checks:
        mark = "ok  " if c.passed else "FAIL"
        detail = c.detail.splitlines() or [""]
        typer.echo(f"  {mark} {c.name:<{width}}  {detail[0][:160]}")
        if not c.passed:
            for extra in detail[1:14]:
                typer.echo(f"       {'':<{width}}  {extra}")
    for w in result.warnings:
        typer.echo(f"  warn {w}")
    t = result.timings
    if t is not None:
        ev = t.speedup_vs_eager_interval or (t.speedup_vs_eager, t.speedup_vs_eager)
        cv = t.speedup_vs_compile_interval or (t.speedup_vs_compile, t.speedup_vs_compile)
        typer.echo("")
        typer.echo(f"  {'':<14}{'median us':>12}{'kernel speedup':>16}{'95% interval':>18}")
        typer.echo(f"  {'eager':<14}{t.eager_us:>12.2f}{t.speedup_vs_eager:>15.2f}x{ev[0]:>10.2f}-{ev[1]:.2f}x")
        typer.echo(
            f"  {'torch.compile':<14}{t.compile_us:>12.2f}{t.speedup_vs_compile:>15.2f}x{cv[0]:>10.2f}-{cv[1]:.2f}x"
        )
        for side, label in (("autotune", "max-autotune"), ("graphs", "CUDA graphs")):
            row = t.baselines.get(side)
            if isinstance(row, dict) and "us" in row:
                iv = row.get("interval") or [row["speedup"], row["speedup"]]
                typer.echo(f"  {label:<14}{row['us']:>12.2f}{row['speedup']:>15.2f}x{iv[0]:>10.2f}-{iv[1]:.2f}x")
        typer.echo(f"  {'kernel':<14}{t.candidate_us:>12.2f}")
        if t.best_baseline and t.speedup_vs_best is not None:
            bv = t.speedup_vs_best_interval or (t.speedup_vs_best, t.speedup_vs_best)
            typer.echo(
                f"  vs the best baseline ({t.best_baseline}): {t.speedup_vs_best:.2f}x ({bv[0]:.2f}-{bv[1]:.2f}x)"
                + ("; the reward is decided on it" if t.reward_baseline == "best" else "")
            )
        if t.roofline and t.fraction_of_peak is not None:
            line = t.roofline
            typer.echo(
                f"  roofline: speed of light {line['sol_us']:.2f} us ({line['bound']}-bound, {line['flops']:,} FLOP, "
                f"{line['bytes']:,} bytes, peaks: {line['peak_source']}); the kernel reaches "
                f"{t.fraction_of_peak:.1%} of it"
            )
        typer.echo(f"  method: {t.method}")
        if t.uncertain:
            typer.echo("  uncertain: an interval straddles the 5% threshold, so the reward may be one off")
    if result.not_measured:
        typer.echo(f"not measured: {result.not_measured}; run the profile again when the GPU is free")
    verdict = "correct" if result.correct else ("does not compile" if not result.compiled else "NOT correct")
    if result.correct and result.precision:
        verdict += f" (verified at {result.precision})"
    reward = "" if result.reward is None else f", reward {result.reward}"
    from cuda_agent_cli.harness.reward import reward_in_words

    typer.echo(f"{verdict}{reward}: {reward_in_words(result.reward)}")
    if result.compile_log and not result.compiled:
        typer.echo(f"full compiler log: {result.compile_log}")


def _report(results: list["HarnessResult"], as_json: bool, what: str) -> None:
    result = _median_result(results)
    if as_json:
        payload = result.to_json()
        if len(results) > 1:
            payload["repeat"] = _repeat_summary(results)
        typer.echo(json.dumps(payload))
    else:
        _print_human(result, what)
        if len(results) > 1:
            summary = _repeat_summary(results)
            typer.echo(f"over {len(results)} profiles (median, range): rewards {summary['rewards']}")
            for key in ("speedup_vs_eager", "speedup_vs_compile"):
                if key in summary:
                    s = summary[key]
                    typer.echo(f"  {key}: {s['median']:.2f}x ({s['min']:.2f}-{s['max']:.2f})")  # type: ignore[index]
    if any(r.not_measured for r in results):
        # The device could not be had quietly: an environment status, never the kernel's failure.
        raise typer.Exit(3)
    raise typer.Exit(0 if all(r.correct for r in results) else 1)


def verify(
    path: PathArg = None,
    ref: RefOpt = None,
    candidate: CandOpt = None,
    device: DeviceOpt = None,
    policy: PolicyOpt = None,
    atol: AtolOpt = None,
    rtol: RtolOpt = None,
    precision: PrecisionOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Compile and check a candidate against its reference (5 random input sets, runtime checks)."""
    _report(_run(False, path, ref, candidate, device, policy, atol, rtol, None, precision=precision), as_json, "verify")


def profile(
    path: PathArg = None,
    ref: RefOpt = None,
    candidate: CandOpt = None,
    device: DeviceOpt = None,
    policy: PolicyOpt = None,
    atol: AtolOpt = None,
    rtol: RtolOpt = None,
    trials: TrialsOpt = None,
    repeat: RepeatOpt = 1,
    reward_baseline: RewardBaselineOpt = None,
    precision: PrecisionOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Verify, then time the candidate beside eager PyTorch and the torch.compile baselines (default,
    max-autotune, CUDA graphs on CUDA); prints the reward."""
    results = _run(True, path, ref, candidate, device, policy, atol, rtol, trials, repeat, reward_baseline, precision)
    _report(results, as_json, "profile")

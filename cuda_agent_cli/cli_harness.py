"""`cuda-agent verify PATH` and `cuda-agent profile PATH` (also --ref FILE --candidate FILE)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from cuda_agent_cli.cli_app import DeviceOpt, JsonOpt, app

if TYPE_CHECKING:
    from cuda_agent_cli.harness.result import HarnessResult

PathArg = Annotated[Optional[Path], typer.Argument(help="A directory with model.py and model_new.py (CUDA-Agent workdir or KernelBench pair).")]
RefOpt = Annotated[Optional[Path], typer.Option("--ref", help="The reference file (class Model, get_inputs).")]
CandOpt = Annotated[Optional[Path], typer.Option("--candidate", help="The candidate file (class ModelNew).")]
PolicyOpt = Annotated[Optional[str], typer.Option("--policy", help="strict (default) or hybrid.")]
AtolOpt = Annotated[Optional[float], typer.Option("--atol", help="Absolute tolerance (default 1e-2).")]
RtolOpt = Annotated[Optional[float], typer.Option("--rtol", help="Relative tolerance (default 1e-2).")]
TrialsOpt = Annotated[Optional[int], typer.Option("--trials", min=1, help="Timed calls (default 100 on cuda, 20 on cpu).")]


def _run(timed: bool, path: Path | None, ref: Path | None, candidate: Path | None, device: str | None,
         policy: str | None, atol: float | None, rtol: float | None, trials: int | None) -> "HarnessResult":
    from cuda_agent_cli.config import load_config
    from cuda_agent_cli.harness import Harness, open_path

    cfg = load_config({"device": device, "policy": policy, "atol": atol, "rtol": rtol})
    workspace = open_path(path, ref, candidate)
    harness = Harness(workspace, device=cfg.device, policy=cfg.policy, atol=cfg.atol, rtol=cfg.rtol, trials=trials)
    return harness.profile() if timed else harness.verify()


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
        typer.echo("")
        typer.echo(f"  {'':<14}{'median us':>12}{'candidate speedup':>20}")
        typer.echo(f"  {'eager':<14}{t.eager_us:>12.2f}{t.speedup_vs_eager:>19.2f}x")
        typer.echo(f"  {'torch.compile':<14}{t.compile_us:>12.2f}{t.speedup_vs_compile:>19.2f}x")
        typer.echo(f"  {'candidate':<14}{t.candidate_us:>12.2f}")
        typer.echo(f"  method: {t.method}")
    verdict = "correct" if result.correct else ("does not compile" if not result.compiled else "NOT correct")
    reward = "" if result.reward is None else f", reward {result.reward}"
    typer.echo(f"{verdict}{reward}")
    if result.compile_log and not result.compiled:
        typer.echo(f"full compiler log: {result.compile_log}")


def _report(result: "HarnessResult", as_json: bool, what: str) -> None:
    if as_json:
        typer.echo(json.dumps(result.to_json()))
    else:
        _print_human(result, what)
    raise typer.Exit(0 if result.correct else 1)


@app.command()
def verify(path: PathArg = None, ref: RefOpt = None, candidate: CandOpt = None, device: DeviceOpt = None,
           policy: PolicyOpt = None, atol: AtolOpt = None, rtol: RtolOpt = None, as_json: JsonOpt = False) -> None:
    """Compile and check a candidate against its reference (5 random input sets, runtime checks)."""
    _report(_run(False, path, ref, candidate, device, policy, atol, rtol, None), as_json, "verify")


@app.command()
def profile(path: PathArg = None, ref: RefOpt = None, candidate: CandOpt = None, device: DeviceOpt = None,
            policy: PolicyOpt = None, atol: AtolOpt = None, rtol: RtolOpt = None, trials: TrialsOpt = None,
            as_json: JsonOpt = False) -> None:
    """Verify, then time the candidate against eager PyTorch and torch.compile; prints the reward."""
    _report(_run(True, path, ref, candidate, device, policy, atol, rtol, trials), as_json, "profile")

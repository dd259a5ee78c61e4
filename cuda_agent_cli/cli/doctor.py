"""`cuda-agent doctor`."""

from __future__ import annotations

import typer

from cuda_agent_cli import __version__
from cuda_agent_cli.cli.options import ApiBaseOpt, DeviceOpt, ModelOpt


def doctor(
    device: DeviceOpt = None,
    model: ModelOpt = None,
    api_base: ApiBaseOpt = None,
) -> None:
    """Check this machine for everything cuda-agent needs, one line each with a fix."""
    from cuda_agent_cli.config import load_config
    from cuda_agent_cli.doctor import overall_ok, run_checks
    from cuda_agent_cli.machine import pick_device

    cfg = load_config({"device": device, "model": model, "api_base": api_base})
    dev = pick_device(cfg.device)
    checks = run_checks(dev, cfg.model, cfg.sources.get("model", "default"), cfg.api_base)
    typer.echo(f"cuda-agent {__version__} — checking for --device {dev}")
    width = max(len(c.name) for c in checks)
    for c in checks:
        mark = "ok  " if c.ok else ("FAIL" if c.required else "warn")
        line = f"  {mark} {c.name:<{width}}  {c.detail}"
        if not c.ok and c.hint:
            line += f"  -> {c.hint}"
        typer.echo(line)
    if overall_ok(checks):
        typer.echo(f"ready for --device {dev}")
        return
    missing = ", ".join(c.name for c in checks if c.required and not c.ok)
    typer.echo(f"not ready for --device {dev}: fix {missing}")
    raise typer.Exit(3)

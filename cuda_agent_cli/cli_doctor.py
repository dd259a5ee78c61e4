"""`cuda-agent doctor`."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from cuda_agent_cli import __version__
from cuda_agent_cli.cli_app import DeviceOpt, ModelOpt, app, resolve_device


@app.command()
def doctor(
    device: DeviceOpt = None,
    model: ModelOpt = None,
    api_base: Annotated[Optional[str], typer.Option("--api-base", help="Base URL of an OpenAI-compatible server (vLLM, Ollama, ...).")] = None,
) -> None:
    """Check this machine for everything cuda-agent needs, one line each with a fix."""
    from cuda_agent_cli.config import load_config
    from cuda_agent_cli.doctor import overall_ok, run_checks

    cfg = load_config({"device": device, "model": model, "api_base": api_base})
    dev = resolve_device(cfg.device)
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

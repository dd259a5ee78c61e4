"""`cuda-agent chat [PATH]`: the textual app over a repository."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from cuda_agent_cli.cli.options import ApiBaseOpt, DeviceOpt, ModelOpt, UnsafeOpt

ModeOpt = Annotated[Optional[str], typer.Option("--mode", help="ask (default), accept-edits or yolo.")]


def chat(
    path: Annotated[
        Optional[Path], typer.Argument(help="The repository to work in (default: the current folder).")
    ] = None,
    model: ModelOpt = None,
    api_base: ApiBaseOpt = None,
    mode: ModeOpt = None,
    device: DeviceOpt = None,
    resume: Annotated[Optional[str], typer.Option("--resume", help="Reopen the chat session with this id.")] = None,
    continue_: Annotated[
        bool,
        typer.Option(
            "--continue", help="Reopen the most recent chat session of this repository (PATH or the current folder)."
        ),
    ] = False,
    unsafe_no_sandbox: UnsafeOpt = False,
) -> None:
    """Chat with the agent over a repository: edits with approval, /optimize kernels, review before writing."""
    from cuda_agent_cli.errors import BadInput

    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise BadInput(
            "cuda-agent chat needs an interactive terminal",
            "for scripts and CI use `cuda-agent optimize TARGET --batch`",
        )
    if resume and continue_:
        raise BadInput("pass either --resume ID or --continue, not both", "drop one of them")
    if mode is not None and mode not in ("ask", "accept-edits", "yolo"):
        raise BadInput(f"unknown --mode {mode!r}", "use ask, accept-edits or yolo")
    import threading

    # textual takes most of the start-up: import it while the session, model and sandbox are
    # set up (the sandbox probe waits on a subprocess), so the first frame comes sooner.
    preload = threading.Thread(target=_import_app, daemon=True)
    preload.start()
    from cuda_agent_cli.chat.session import ChatOptions, ChatSession
    from cuda_agent_cli.config import load_config

    cfg = load_config({})
    runtime = ChatSession(
        ChatOptions(
            path=path,
            model=model,
            api_base=api_base,
            mode=mode,
            resume=resume,
            continue_latest=continue_,
            device=device,
            allow_unsafe=unsafe_no_sandbox,
            data_dir=Path(cfg.data_dir) if cfg.data_dir else None,
        )
    )
    preload.join()
    from cuda_agent_cli.tui.app import ChatApp

    app = ChatApp(runtime, banner=runtime.sandbox.banner)
    try:
        app.run()
    finally:
        app.finish_work(timeout=10.0)  # a turn cut short by quitting still records its stop
        runtime.close()
    typer.echo(f"session {runtime.session_id} saved — `cuda-agent chat --resume {runtime.session_id}` reopens it")


def _import_app() -> None:
    import cuda_agent_cli.tui.app  # noqa: F401

"""Checks that fail fast: before a session pays for a single model call."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from cuda_agent_cli.errors import BadInput, EnvironmentMissing, InputSpecError, ModelConfigError

if TYPE_CHECKING:
    from cuda_agent_cli.config import Config
    from cuda_agent_cli.task.inputs import CallSpec
    from cuda_agent_cli.task.target import Task


def check_model(model: str | None, api_base: str | None = None) -> None:
    """Exit 3 with no model or a missing key, exit 2 for a model string litellm cannot route.

    With `api_base` (a local or self-hosted OpenAI-compatible server) no API key is required."""
    if not model:
        raise EnvironmentMissing(
            "no model configured",
            "pass --model (e.g. anthropic/claude-sonnet-4-5) or set CUDA_AGENT_MODEL; "
            "`cuda-agent demo` runs without one",
        )
    if model.startswith("replay:"):
        path = Path(model.split(":", 1)[1]).expanduser()
        if not path.is_file():
            raise ModelConfigError(f"replay file {path} does not exist", "pass --model replay:PATH/TO/FILE.jsonl")
        return
    check_api_base(api_base)
    import contextlib
    import io

    from cuda_agent_cli.model.provider import describe_model

    # litellm prints a provider list on stdout for unknown models; the user gets our line instead.
    with contextlib.redirect_stdout(io.StringIO()):
        known, missing = describe_model(model, api_base)
    if not known:
        raise ModelConfigError(
            f"unknown model `{model}`",
            "use a litellm model string such as anthropic/claude-sonnet-4-5 or openai/gpt-4.1",
        )
    if missing:
        raise EnvironmentMissing(f"{', '.join(missing)} is not set for {model}", f"export {missing[0]}=...")


def check_limits(cfg: Config) -> None:
    """A limit that would stop the session before its first turn is a mistake, not a setting."""
    for name, unit in (("max_turns", ""), ("max_cost", " USD"), ("timeout", " s")):
        value = getattr(cfg, name)
        if value is not None and value <= 0:
            raise BadInput(
                f"{name} {value:g}{unit} {cfg.origin_phrase(name)} leaves no room for a single turn",
                f"give a positive {name}" + (" (or leave it out for no limit)" if name != "max_turns" else ""),
            )


def check_api_base(api_base: str | None) -> None:
    """An --api-base without a scheme reaches nothing; say so before the session starts."""
    if not api_base:
        return
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(api_base)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        raise ModelConfigError(
            f"--api-base {api_base} is not an http:// or https:// URL",
            "write it like --api-base http://localhost:8000/v1",
        )


def captured_block(task: Task, command: str) -> str:
    """What --capture recorded, shown before the session so a wrong call is caught at once."""
    cases = task.cases()
    name = task.target.class_name
    if len(cases) == 1:
        lines = [f"captured the calls of {name} in `{command}`: one signature"]
    else:
        lines = [
            f"captured the calls of {name} in `{command}`: {len(cases)} signatures; the session optimizes "
            "for the first, and the kernel is verified and timed at each"
        ]
    for i, case in enumerate(cases):
        times = f"{case.count} call{'s' if case.count != 1 else ''}" if case.count is not None else ""
        forward, init = case.call.signature_lines(task.forward_params)
        lines.append(f"  {i + 1}. {forward}  {times}".rstrip())
        lines.append(f"     {init}")
    return "\n".join(lines)


def check_input_devices(call: CallSpec, cfg: Config, what: str) -> None:
    """Refuse inputs whose devices disagree with each other or with the configured device: the
    harness moves every input to the session's device, so a difference would be dropped silently."""
    named: dict[str, str] = {}
    for label, tensor in call.tensors():
        if tensor.device:
            named.setdefault(tensor.device.split(":")[0], label)
    verb = "recorded" if what == "--capture" else "puts"
    if len(named) > 1:
        (d1, l1), (d2, l2) = sorted(named.items())[:2]
        raise InputSpecError(
            f"{what} {verb} {l1} on {d1} but {l2} on {d2}; a session runs on one device",
            "name the same device for every tensor (or none, to use --device)",
        )
    if not named or cfg.device is None:
        return
    ((device, label),) = named.items()
    if device == cfg.device:
        return
    origin = cfg.origin("device")
    where = f"--device {cfg.device}" if origin == "--device" else f"device {cfg.device} from {origin}"
    if what == "--capture":
        hint = f"pass --device {device}, or give {cfg.device} inputs with --inputs"
    else:
        hint = f"drop `{device}` from --inputs (or write `{cfg.device}`), or pass --device {device}"
    raise InputSpecError(f"{what} {verb} {label} on {device}, but {where} runs the session on {cfg.device}", hint)

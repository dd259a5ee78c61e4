"""Build a model from a `--model` string: `replay:FILE.jsonl` or any litellm model string."""

from __future__ import annotations

import os
import time
from typing import Any

from cuda_agent_cli.errors import ModelConfigError
from cuda_agent_cli.model.port import ModelPort

REPLAY_PREFIX = "replay:"
TOOL_PROTOCOLS = {"auto": None, "native": True, "text": False}
TOOL_PROTOCOL_ENV = "CUDA_AGENT_TOOL_PROTOCOL"


def parse_tool_protocol(value: str | None) -> bool | None:
    """ "native" -> True, "text" -> False, "auto"/None -> None (decide from the model)."""
    if value is None or value == "":
        return None
    key = value.strip().lower()
    if key not in TOOL_PROTOCOLS:
        raise ModelConfigError(f"unknown tool protocol {value!r}", "use auto, native or text")
    return TOOL_PROTOCOLS[key]


def make_model(
    model_string: str | None,
    api_base: str | None = None,
    *,
    native_tools: bool | None = None,
    tool_protocol: str | None = None,
    api_key: str | None = None,
    max_retries: int = 5,
    backoff_base: float = 1.0,
    request_timeout: float = 600.0,
    **extra: Any,
) -> ModelPort:
    """The ModelPort for `model_string`; one clear ModelConfigError (exit 2) when it is unusable.

    Tool calling is native when the model has it; `native_tools`, or `tool_protocol`
    ("auto" | "native" | "text", default from $CUDA_AGENT_TOOL_PROTOCOL), overrides that.
    `extra` goes to litellm.completion as is (temperature, top_p, ...)."""
    if not model_string or not model_string.strip():
        raise ModelConfigError(
            "no model configured",
            "pass --model (e.g. anthropic/claude-sonnet-4-5, hosted_vllm/NAME with --api-base, replay:FILE.jsonl) "
            "or set CUDA_AGENT_MODEL",
        )
    model_string = model_string.strip()
    if model_string.startswith(REPLAY_PREFIX):
        from cuda_agent_cli.model.replay import ReplayModel

        path = model_string[len(REPLAY_PREFIX) :]
        if not path:
            raise ModelConfigError("replay: needs a file", "pass --model replay:PATH/TO/FILE.jsonl")
        return ReplayModel.from_file(path)
    from cuda_agent_cli.model.litellm_adapter import LiteLLMModel

    if native_tools is None:
        native_tools = parse_tool_protocol(tool_protocol or os.environ.get(TOOL_PROTOCOL_ENV))
    temperature = extra.pop("temperature", None)
    return LiteLLMModel(
        model_string,
        api_base=api_base,
        api_key=api_key,
        native_tools=native_tools,
        max_retries=max_retries,
        backoff_base=backoff_base,
        request_timeout=request_timeout,
        temperature=temperature,
        extra=extra,
    )


PROBE_MESSAGES = [{"role": "user", "content": "Reply with the single word: ready"}]


def probe_model(model_string: str, api_base: str | None = None, timeout: float = 30.0) -> str:
    """Ask the model for one short answer, as a session's first call would, and say how it went.

    A replay file is read and validated instead. Raises what a session would meet on its first
    turn: ModelConfigError (exit 2), EnvironmentMissing for a rejected key, ModelUnavailable for an
    endpoint that cannot be reached or does not answer with a chat completion (exit 3)."""
    model = make_model(model_string, api_base, max_retries=0, request_timeout=timeout, max_tokens=16)
    if model_string.strip().startswith(REPLAY_PREFIX):
        return f"{len(getattr(model, 'turns', []))} recorded turns"
    t0 = time.monotonic()
    turn = model.complete(PROBE_MESSAGES, [])
    said = " ".join((turn.content or "").split())
    said = f"{said[:40]}…" if len(said) > 40 else said
    return f"answered in {time.monotonic() - t0:.1f} s" + (f": {said!r}" if said else " (no text)")

"""Build a model from a `--model` string: `replay:FILE.jsonl` or any litellm model string."""

from __future__ import annotations

from typing import Any

from cuda_agent_cli.errors import ModelConfigError
from cuda_agent_cli.model.base import ModelPort

REPLAY_PREFIX = "replay:"


def make_model(
    model_string: str | None,
    api_base: str | None = None,
    *,
    native_tools: bool | None = None,
    api_key: str | None = None,
    max_retries: int = 5,
    backoff_base: float = 1.0,
    request_timeout: float = 600.0,
    **extra: Any,
) -> ModelPort:
    """The ModelPort for `model_string`; one clear ModelConfigError (exit 2) when it is unusable.

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

        path = model_string[len(REPLAY_PREFIX):]
        if not path:
            raise ModelConfigError("replay: needs a file", "pass --model replay:PATH/TO/FILE.jsonl")
        return ReplayModel.from_file(path)
    from cuda_agent_cli.model.litellm_adapter import LiteLLMModel

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

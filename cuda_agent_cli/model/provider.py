"""What litellm knows about a model string: the only place besides the adapter that asks it."""

from __future__ import annotations

import os

# litellm must never fetch its price map over the network when imported.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def describe_model(model: str, api_base: str | None = None) -> tuple[bool, list[str]]:
    """(litellm knows how to route `model`, names of API-key variables that are missing).

    With an `api_base` (vLLM, Ollama, any OpenAI-compatible server) no key is required: local
    servers accept any, and the adapter sends a placeholder when none is set."""
    import litellm

    try:
        litellm.get_llm_provider(model, api_base=api_base)
    except Exception:
        return False, []
    if api_base:
        return True, []
    try:
        env = litellm.validate_environment(model=model)
    except Exception:
        return True, []
    return True, list(env.get("missing_keys") or [])

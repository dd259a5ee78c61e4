"""What a turn costs, and prompt caching for Anthropic models (no network: litellm's local map)."""

from __future__ import annotations

import pytest

from cuda_agent_cli.model.factory import make_model
from cuda_agent_cli.model.port import Usage  # first: the model package keeps litellm offline


def test_hosted_models_are_priced_and_local_ones_are_free():
    gpt = make_model("openai/gpt-4o")
    assert gpt._cost(Usage(1000, 100)) == pytest.approx(1000 * 2.5e-6 + 100 * 1e-5)
    assert make_model("openai/gpt-4o", "http://127.0.0.1:8000/v1")._cost(Usage(1000, 100)) == 0.0
    assert make_model("hosted_vllm/Qwen/Qwen3-8B", "http://127.0.0.1:8000/v1")._cost(Usage(10**6, 10**5)) == 0.0


def test_claude_marks_a_cached_prefix_and_cache_reads_are_cheaper():
    import litellm

    claude = make_model("anthropic/claude-sonnet-4-5")
    assert claude.context_window == 200_000
    request = claude._request([{"role": "system", "content": "S"}, {"role": "user", "content": "u"}], [])
    assert {"location": "message", "role": "system"} in request["cache_control_injection_points"]
    full = claude._cost(Usage(100_000, 1_000))
    cached = claude._cost(
        Usage(100_000, 1_000),
        litellm.Usage(
            prompt_tokens=100_000,
            completion_tokens=1_000,
            total_tokens=101_000,
            cache_read_input_tokens=90_000,
            prompt_tokens_details={"cached_tokens": 90_000},
        ),
    )
    assert cached < full / 3
    assert "cache_control_injection_points" not in make_model("openai/gpt-4o")._request([], [])


def test_a_local_server_needs_no_api_key(monkeypatch):
    from cuda_agent_cli.model.provider import describe_model

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert describe_model("openai/my-model") == (True, ["OPENAI_API_KEY"])
    assert describe_model("openai/my-model", "http://127.0.0.1:8000/v1") == (True, [])
    assert describe_model("no-such-provider-model-xyz")[0] is False

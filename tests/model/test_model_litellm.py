"""The litellm adapter over real HTTP against the fake OpenAI-compatible server."""

from __future__ import annotations

import pytest

from cuda_agent_cli.errors import ContextOverflow, EnvironmentMissing, ModelUnavailable
from cuda_agent_cli.model.factory import make_model
from cuda_agent_cli.model.fake_server import FakeOpenAIServer, reply_error, reply_raw, reply_text, reply_tool

pytestmark = pytest.mark.integration

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "Read",
            "description": "Read a file",
            "parameters": {
                "type": "object",
                "properties": {"file_path": {"type": "string"}},
                "required": ["file_path"],
            },
        },
    }
]
MSGS = [{"role": "system", "content": "SYSTEM"}, {"role": "user", "content": "task"}]


def _model(srv, **kw):
    kw.setdefault("backoff_base", 0.01)
    return make_model("openai/fake-coder", srv.api_base, **kw)


def test_native_tool_call_streams_text_and_assembles_arguments():
    with FakeOpenAIServer(
        [
            reply_tool(
                "Read",
                {"file_path": "model.py"},
                content="Reading the reference.",
                prompt_tokens=1200,
                completion_tokens=40,
            )
        ]
    ) as srv:
        model = _model(srv)
        shown: list[str] = []
        turn = model.complete(MSGS, TOOLS, shown.append)
    assert len(shown) > 1 and "".join(shown) == "Reading the reference."
    assert turn.content == "Reading the reference."
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [("Read", {"file_path": "model.py"})]
    assert (turn.usage.prompt_tokens, turn.usage.completion_tokens) == (1200, 40)
    assert turn.cost_usd == 0.0  # a local OpenAI-compatible server costs nothing
    body = srv.requests[0]
    assert body["stream"] is True and body["tools"][0]["function"]["name"] == "Read"
    assert body["messages"][0] == {"role": "system", "content": "SYSTEM"}


def test_text_protocol_sends_no_tools_and_parses_calls_from_text():
    with FakeOpenAIServer(
        [
            reply_text('Let me read.\n<tool_call>{"name": "Read", "arguments": {"file_path": "a.py"}}</tool_call>'),
            reply_text('<tool_call>{"name": "Read", "arguments": {}}</tool_call>'),
        ]
    ) as srv:
        model = _model(srv, native_tools=False)
        shown: list[str] = []
        turn = model.complete(MSGS, TOOLS, shown.append)
        bad = model.complete(MSGS, TOOLS)
    assert "tools" not in srv.requests[0]
    assert "<tool_call>" in srv.requests[0]["messages"][0]["content"]
    assert turn.content == "Let me read." and "<tool_call>" not in "".join(shown)
    assert turn.tool_calls[0].arguments == {"file_path": "a.py"} and turn.tool_calls[0].error is None
    assert bad.tool_calls[0].error == "Read: missing required argument(s) file_path."


def test_rate_limit_is_retried_after_the_servers_retry_after():
    waits: list[tuple[int, float, str]] = []
    with FakeOpenAIServer([reply_error(429, "slow down", retry_after=0.05), reply_text("ok")]) as srv:
        model = _model(srv)
        model.on_retry = lambda a, w, r: waits.append((a, w, r))
        turn = model.complete(MSGS, TOOLS)
    assert turn.content == "ok" and len(srv.requests) == 2
    assert waits == [(1, 0.05, "rate limited")]


def test_server_errors_give_up_after_max_retries():
    with FakeOpenAIServer([reply_error(500, "boom")] * 3) as srv:
        model = _model(srv, max_retries=2)
        with pytest.raises(ModelUnavailable) as exc:
            model.complete(MSGS, TOOLS)
    assert len(srv.requests) == 3 and exc.value.exit_code == 3 and "3 attempts" in exc.value.message


def test_auth_and_context_errors_are_not_retried():
    with FakeOpenAIServer(
        [
            reply_error(401, "invalid api key"),
            reply_error(400, "This model's maximum context length is 8192 tokens", code="context_length_exceeded"),
        ]
    ) as srv:
        model = _model(srv)
        with pytest.raises(EnvironmentMissing) as auth:
            model.complete(MSGS, TOOLS)
        assert len(srv.requests) == 1
        assert "OPENAI_API_KEY" in auth.value.one_line()
        with pytest.raises(ContextOverflow):
            model.complete(MSGS, TOOLS)
        assert len(srv.requests) == 2


def test_server_without_tool_support_switches_to_the_text_protocol():
    refusal = reply_error(400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set')
    with FakeOpenAIServer(
        [refusal, reply_text('<tool_call>{"name": "Read", "arguments": {"file_path": "m"}}</tool_call>')]
    ) as srv:
        model = _model(srv)
        turn = model.complete(MSGS, TOOLS)
    assert model.native_tools is False
    assert "tools" in srv.requests[0] and "tools" not in srv.requests[1]
    assert turn.tool_calls[0].arguments == {"file_path": "m"}


def test_malformed_native_arguments_become_call_errors():
    with FakeOpenAIServer([reply_tool("Read", '{"file_path": "a.py"')]) as srv:
        turn = _model(srv).complete(MSGS, TOOLS)
    assert turn.tool_calls[0].name == "Read" and "not valid JSON" in turn.tool_calls[0].error


def test_hosted_vllm_prefix_streams_and_costs_nothing():
    with FakeOpenAIServer([reply_tool("Read", {"file_path": "x"}, prompt_tokens=5000, completion_tokens=500)]) as srv:
        model = make_model("hosted_vllm/Qwen/Qwen3-8B", srv.api_base)
        turn = model.complete(MSGS, TOOLS)
    assert srv.requests[0]["model"] == "Qwen/Qwen3-8B"
    assert turn.tool_calls[0].arguments == {"file_path": "x"} and turn.cost_usd == 0.0


HTML_PAGE = "<html><body><h1>502 Bad Gateway</h1><p>nginx</p></body></html>"


@pytest.mark.parametrize(
    "body, content_type, says",
    [
        (HTML_PAGE, "text/html", "answered HTTP 200 with text/html, not a chat completion: <html><body><h1>502 Bad"),
        (
            '{"id": "chatcmpl-1", "choices": [{"index": 0, "mess',
            "application/json",
            "answered HTTP 200 with application/json, not a chat completion: a body that is not valid JSON "
            "(Unterminated string",
        ),
        (
            '{"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m", "choices": []}',
            "application/json",
            "answered HTTP 200 with application/json, not a chat completion: a completion with an empty `choices` list",
        ),
    ],
)
def test_a_server_that_answers_200_without_a_completion_is_unavailable_not_done(body, content_type, says):
    # Streamed, then once more without streaming to see what the server sends; never retried further.
    with FakeOpenAIServer([reply_raw(body, content_type)] * 3) as srv:
        api_base = srv.api_base
        with pytest.raises(ModelUnavailable) as exc:
            _model(srv).complete(MSGS, TOOLS)
    assert len(srv.requests) == 2 and srv.requests[0]["stream"] is True and not srv.requests[1].get("stream")
    line = exc.value.one_line()
    assert exc.value.exit_code == 3 and f"openai/fake-coder: the server at {api_base} {says}" in line
    assert "--api-base" in line and "\n" not in line


def test_a_server_that_ignores_stream_still_gives_its_turn():
    whole = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "Reading.",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "Read", "arguments": '{"file_path": "a"}'},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    }
    import json

    with FakeOpenAIServer([reply_raw(json.dumps(whole))] * 2) as srv:
        shown: list[str] = []
        turn = _model(srv).complete(MSGS, TOOLS, shown.append)
    assert turn.content == "Reading." and "".join(shown) == "Reading."
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [("Read", {"file_path": "a"})]
    assert (turn.usage.prompt_tokens, turn.usage.completion_tokens) == (5, 3)


def test_an_empty_reply_is_still_a_turn():
    with FakeOpenAIServer([reply_text("")]) as srv:
        turn = _model(srv).complete(MSGS, TOOLS)
    assert turn.content is None and turn.tool_calls == [] and len(srv.requests) == 1


def _free_port() -> int:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _fails_at_once(api_base: str) -> ModelUnavailable:
    import time

    retries: list[tuple[int, float, str]] = []
    model = make_model("openai/fake-coder", api_base, backoff_base=5.0)
    model.on_retry = lambda a, w, r: retries.append((a, w, r))
    t0 = time.monotonic()
    with pytest.raises(ModelUnavailable) as exc:
        model.complete(MSGS, TOOLS)
    assert retries == []  # no backoff of 5 s, 10 s, ...
    assert time.monotonic() - t0 < 4
    assert exc.value.exit_code == 3
    return exc.value


def test_a_refused_connection_is_not_retried_and_names_the_host():
    port = _free_port()
    err = _fails_at_once(f"http://127.0.0.1:{port}/v1")
    line = err.one_line()
    assert f"cannot reach 127.0.0.1:{port}: the connection was refused (host unreachable)" in line
    assert "--api-base" in line and "InternalServerError" not in line


def test_a_name_that_does_not_resolve_is_not_retried_and_names_the_host():
    err = _fails_at_once("http://no-such-host.invalid:1/v1")
    line = err.one_line()
    assert "cannot reach no-such-host.invalid:1: the name does not resolve (host unreachable)" in line
    assert "InternalServerError" not in line


def test_error_text_loses_the_wrappers_repeated_names():
    from cuda_agent_cli.model.litellm_adapter import _short

    raw = Exception("litellm.InternalServerError: InternalServerError: OpenAIException - Connection error.")
    assert _short(raw) == "InternalServerError: Connection error."
    raw = Exception(
        "litellm.InternalServerError: AnthropicException - overloaded. Handle with `litellm.InternalServerError`."
    )
    assert _short(raw) == "InternalServerError: overloaded."

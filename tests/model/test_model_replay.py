"""`--model replay:FILE.jsonl` and the model factory's errors."""

from __future__ import annotations

import json

import pytest

from cuda_agent_cli.errors import ModelConfigError
from cuda_agent_cli.model.factory import make_model
from cuda_agent_cli.model.replay import EXHAUSTED_TEXT, ReplayModel


def _write(tmp_path, lines):
    p = tmp_path / "s.jsonl"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_replay_plays_turns_then_answers_without_a_call(tmp_path):
    p = _write(
        tmp_path,
        [
            json.dumps(
                {"content": "reading", "tool_calls": [{"name": "Read", "arguments": {"file_path": "model.py"}}]}
            ),
            "",
            json.dumps({"content": None, "tool_calls": [{"name": "Compile", "arguments": {}}]}),
        ],
    )
    model = make_model(f"replay:{p}")
    assert isinstance(model, ReplayModel) and model.name == f"replay:{p}"
    seen: list[str] = []
    t1 = model.complete([], [], seen.append)
    assert t1.content == "reading" and t1.tool_calls[0].name == "Read" and t1.tool_calls[0].id
    assert seen == ["reading"]
    t2 = model.complete([], [])
    assert t2.tool_calls[0].name == "Compile" and t2.tool_calls[0].id != t1.tool_calls[0].id
    t3 = model.complete([], [])
    assert t3.tool_calls == [] and t3.content == EXHAUSTED_TEXT and t3.cost_usd == 0


@pytest.mark.parametrize(
    "line, words",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"content": 3}', '"content" must be a string or null'),
        ('{"tool_calls": [{"arguments": {}}]}', 'tool_calls[0] needs a string "name"'),
        ('{"tool_calls": [{"name": "Read", "arguments": "x"}]}', "tool_calls[0].arguments must be an object"),
    ],
)
def test_malformed_replay_line_names_file_and_line(tmp_path, line, words):
    p = _write(tmp_path, ['{"content": "ok"}', line])
    with pytest.raises(ModelConfigError) as exc:
        make_model(f"replay:{p}")
    assert exc.value.exit_code == 2
    assert f"{p}:2" in exc.value.one_line() and words in exc.value.one_line()


def test_missing_replay_file_and_missing_model_are_clear(tmp_path):
    with pytest.raises(ModelConfigError, match="does not exist"):
        make_model(f"replay:{tmp_path / 'nope.jsonl'}")
    with pytest.raises(ModelConfigError, match="no model configured"):
        make_model(None)


def test_unknown_model_string_is_a_config_error():
    with pytest.raises(ModelConfigError) as exc:
        make_model("definitely-not-a-model-xyz")
    assert exc.value.exit_code == 2 and "provider-prefixed" in exc.value.one_line()


def test_tool_protocol_override(monkeypatch):
    from cuda_agent_cli.model.factory import parse_tool_protocol

    assert [parse_tool_protocol(v) for v in ("auto", "native", "TEXT", None)] == [None, True, False, None]
    with pytest.raises(ModelConfigError) as exc:
        parse_tool_protocol("xml")
    assert exc.value.one_line() == "unknown tool protocol 'xml' — use auto, native or text"
    monkeypatch.setenv("CUDA_AGENT_TOOL_PROTOCOL", "text")
    assert make_model("openai/some-model", "http://127.0.0.1:9/v1").native_tools is False
    assert make_model("openai/some-model", "http://127.0.0.1:9/v1", tool_protocol="native").native_tools is True

"""The text tool-call protocol: parsing, schema validation, conversation rewriting."""

from __future__ import annotations

import json

from cuda_agent_cli.model.textproto import (
    CallBlockFilter,
    parse_text_tool_calls,
    to_text_messages,
    tool_index,
    validate_arguments,
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "Read",
            "description": "Read a file",
            "parameters": {
                "type": "object",
                "properties": {"file_path": {"type": "string"}, "limit": {"type": "integer"}},
                "required": ["file_path"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "Grep",
            "description": "Search",
            "parameters": {
                "type": "object",
                "properties": {
                    "pattern": {"type": "string"},
                    "output_mode": {"type": "string", "enum": ["content", "count"]},
                },
                "required": ["pattern"],
            },
        },
    },
]
INDEX = tool_index(TOOLS)


def test_parses_calls_and_strips_them_from_the_text():
    text = (
        'Let me look.\n<tool_call>{"name": "Read", "arguments": {"file_path": "model.py"}}</tool_call>\n'
        '<tool_call>{"name": "Grep", "arguments": {"pattern": "relu"}}</tool_call>'
    )
    visible, calls = parse_text_tool_calls(text, INDEX)
    assert visible == "Let me look."
    assert [(c.name, c.arguments, c.error) for c in calls] == [
        ("Read", {"file_path": "model.py"}, None),
        ("Grep", {"pattern": "relu"}, None),
    ]
    assert calls[0].id != calls[1].id


def test_unclosed_block_fenced_json_and_string_arguments_are_accepted():
    _, calls = parse_text_tool_calls(
        '<tool_call>```json\n{"name": "Read", "arguments": "{\\"file_path\\": \\"a\\"}"}\n```', INDEX
    )
    assert calls[0].error is None and calls[0].arguments == {"file_path": "a"}


def test_malformed_calls_carry_errors_that_say_what_to_fix():
    _, calls = parse_text_tool_calls('<tool_call>{"name": "Read", "arguments": {"file_path": }}</tool_call>', INDEX)
    assert "not valid JSON" in calls[0].error and "<tool_call>" in calls[0].error
    _, calls = parse_text_tool_calls('<tool_call>["Read"]</tool_call>', INDEX)
    assert 'string "name"' in calls[0].error


def test_schema_validation_messages():
    assert validate_arguments("Write", {}, INDEX) == "Unknown tool 'Write'. Available tools: Grep, Read."
    assert validate_arguments("Read", {}, INDEX) == "Read: missing required argument(s) file_path."
    assert "unknown argument(s) path" in validate_arguments("Read", {"file_path": "a", "path": "b"}, INDEX)
    assert "'limit' must be integer, got bool" in validate_arguments("Read", {"file_path": "a", "limit": True}, INDEX)
    assert 'must be one of ["content", "count"]' in validate_arguments(
        "Grep", {"pattern": "x", "output_mode": "files"}, INDEX
    )
    assert validate_arguments("Grep", {"pattern": "x", "extra": 1}, INDEX) is None  # additionalProperties allowed


def test_conversation_is_rewritten_for_text_only_models():
    msgs = [
        {"role": "system", "content": "SKILL"},
        {"role": "user", "content": "task"},
        {
            "role": "assistant",
            "content": "reading",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "Read", "arguments": json.dumps({"file_path": "a"})},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "Read", "arguments": json.dumps({"file_path": "b"})},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "A"},
        {"role": "tool", "tool_call_id": "c2", "content": "B"},
    ]
    out = to_text_messages(msgs, TOOLS)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user"]
    assert (
        out[0]["content"].startswith("SKILL")
        and "<tool_call>" in out[0]["content"]
        and '"file_path"' in out[0]["content"]
    )
    assert out[2]["content"].count("<tool_call>") == 2
    _, calls = parse_text_tool_calls(out[2]["content"], INDEX)
    assert [c.arguments for c in calls] == [{"file_path": "a"}, {"file_path": "b"}]
    assert (
        out[3]["content"]
        == '<tool_result name="Read">\nA\n</tool_result>\n\n<tool_result name="Read">\nB\n</tool_result>'
    )
    assert all("tool_calls" not in m for m in out)


def test_stream_filter_hides_call_blocks_split_across_chunks():
    shown: list[str] = []
    f = CallBlockFilter(shown.append)
    text = 'I will read it. <tool_call>{"name": "Read", "arguments": {}}</tool_call> after <to'
    for i in range(0, len(text), 3):
        f.feed(text[i : i + 3])
    f.flush()
    assert "".join(shown) == "I will read it.  after <to"

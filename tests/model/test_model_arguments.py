"""model.arguments: the one check of a tool call's arguments against its schema, worded by the
text protocol for the model and by the toolbox as its list."""

from __future__ import annotations

from cuda_agent_cli.actions.toolbox import validate
from cuda_agent_cli.model.arguments import argument_problems, as_declared
from cuda_agent_cli.model.textproto import validate_arguments

SCHEMA = {
    "type": "object",
    "properties": {
        "file_path": {"type": "string"},
        "limit": {"type": "integer", "minimum": 1},
        "mode": {"type": "string", "enum": ["a", "b"]},
        "edits": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {"old_string": {"type": "string"}, "new_string": {"type": "string"}},
                "required": ["old_string", "new_string"],
            },
        },
    },
    "required": ["file_path"],
    "additionalProperties": False,
}


def test_the_loop_and_the_toolbox_agree_on_what_is_valid() -> None:
    calls = [
        {"file_path": "a"},
        {"file_path": "a", "limit": 3.0, "mode": None},
        {},
        {"file_path": 1},
        {"file_path": "a", "limit": 0},
        {"file_path": "a", "limit": True},
        {"file_path": "a", "mode": "c"},
        {"file_path": "a", "edits": []},
        {"file_path": "a", "edits": [{"old_string": "x"}]},
        {"file_path": "a", "extra": 1},
    ]
    for args in calls:
        loop = validate_arguments("T", args, {"T": SCHEMA})
        toolbox = validate(args, SCHEMA)
        assert (loop is None) == (not toolbox) == (not argument_problems(args, SCHEMA)), args


def test_each_reader_gets_its_own_wording() -> None:
    args = {"file_path": "a", "edits": [{"old_string": "x"}]}
    assert validate_arguments("T", args, {"T": SCHEMA}) == "T: missing required argument(s) edits[0].new_string."
    assert validate(args, SCHEMA) == ["missing required parameter `new_string`"]
    args = {"file_path": "a", "limit": 0}
    assert validate_arguments("T", args, {"T": SCHEMA}) == "T: argument 'limit' must be at least 1, got 0."
    assert validate(args, SCHEMA) == ["`limit` must be at least 1, got 0"]


def test_valid_arguments_reach_the_tool_as_declared() -> None:
    assert as_declared({"file_path": "a", "limit": 3.0, "mode": None}, SCHEMA) == {"file_path": "a", "limit": 3}
    assert type(as_declared({"limit": 3.0}, SCHEMA)["limit"]) is int

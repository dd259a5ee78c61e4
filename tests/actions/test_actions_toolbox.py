"""Toolbox: schemas for the model, argument validation, errors never raised, output capping."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cuda_agent_cli.actions import ActionContext, Toolbox, ToolResult, make_toolbox, standard_actions
from cuda_agent_cli.actions.toolbox import OUTPUT_LIMIT, cap_output, validate
from cuda_agent_cli.sandbox import Sandbox, SandboxPolicy, SandboxStatus

LOCKED = ["model.py", "binding.cpp", "binding_registry.h", "SKILL.md"]


def make_toolbox_for(tmp_path: Path, extra: tuple = ()) -> Toolbox:
    ws = tmp_path / "ws"
    (ws / "kernels").mkdir(parents=True)
    for name in LOCKED + ["model_new.py"]:
        (ws / name).write_text(f"# {name}\n")
    pol = SandboxPolicy.optimize(ws, LOCKED, sandbox_uid=None, sandbox_gid=None)
    sb = Sandbox(pol, SandboxStatus(False, "unit tests run unconfined"), enabled=False)
    sb.prepare()
    return make_toolbox(ActionContext(sb), extra)


# docs/architecture.md "Contracts": parameter names exactly as models know them from Claude Code.
EXPECTED = {
    "Bash": {"command", "timeout", "description", "run_in_background"},
    "BashOutput": {"bash_id", "filter"},
    "KillBash": {"shell_id"},
    "Read": {"file_path", "offset", "limit"},
    "Write": {"file_path", "content"},
    "Edit": {"file_path", "old_string", "new_string", "replace_all"},
    "MultiEdit": {"file_path", "edits"},
    "Glob": {"pattern", "path"},
    "Grep": {"pattern", "path", "glob", "type", "output_mode", "-i", "-n", "-A", "-B", "-C", "head_limit", "multiline"},
    "NotebookEdit": {"notebook_path", "cell_id", "new_source", "cell_type", "edit_mode"},
    "Compile": set(),
    "Verify": set(),
    "Profile": set(),
}


def test_every_tool_has_the_claude_code_parameters_and_a_real_description() -> None:
    actions = {a.name: a for a in standard_actions()}
    assert set(actions) == set(EXPECTED)
    for name, action in actions.items():
        schema = action.input_schema
        assert schema["type"] == "object" and schema.get("additionalProperties") is False
        assert set(schema["properties"]) == EXPECTED[name], name
        assert len(action.description) > 150, f"{name}'s description is too thin for a model"
    writers = {a.name for a in actions.values() if a.writes}
    assert writers == {"Bash", "Write", "Edit", "MultiEdit", "NotebookEdit"}


def test_schemas_are_in_openai_function_format(tmp_path: Path) -> None:
    tb = make_toolbox_for(tmp_path)
    schemas = tb.schemas()
    assert {s["function"]["name"] for s in schemas} == set(EXPECTED) - {"Compile", "Verify", "Profile"}
    for s in schemas:
        assert s["type"] == "function" and s["function"]["parameters"]["type"] == "object"


@pytest.mark.parametrize(
    "name,args,needle",
    [
        ("Read", {}, "missing required parameter `file_path`"),
        ("Read", {"file_path": 3}, "`file_path` must be a string"),
        ("Read", {"file_path": "x", "offset": 0}, "`offset` must be at least 1"),
        ("Read", {"file_path": "x", "lines": 5}, "unknown parameter `lines`"),
        ("Bash", {"command": "true", "timeout": 700000}, "at most 600000"),
        ("Grep", {"pattern": "x", "output_mode": "lines"}, "must be one of"),
        ("MultiEdit", {"file_path": "a", "edits": []}, "at least 1"),
        ("MultiEdit", {"file_path": "a", "edits": [{"old_string": "a"}]}, "missing required parameter `new_string`"),
        ("Edit", {"file_path": "a", "old_string": "x", "new_string": "y", "replace_all": "yes"}, "must be a boolean"),
        ("Frobnicate", {}, "unknown tool `Frobnicate`"),
    ],
)
def test_bad_calls_come_back_as_precise_errors(tmp_path: Path, name: str, args: dict, needle: str) -> None:
    r = make_toolbox_for(tmp_path).call(name, args)
    assert r.is_error and needle in r.output, r.output


def test_arguments_that_are_not_an_object_are_an_error_not_a_crash(tmp_path: Path) -> None:
    tb = make_toolbox_for(tmp_path)
    for bad in ("file_path=x", ["x"], 5):
        r = tb.call("Read", bad)
        assert r.is_error and "must be an object" in r.output


def test_integer_valued_floats_are_accepted_as_integers() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    assert validate({"n": 3.0}, schema) == []
    assert validate({"n": 3.5}, schema) and validate({"n": True}, schema)


class Boom:
    name = "Boom"
    description = "raises"
    input_schema: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
    writes = False
    runs_commands = False

    def run(self, args: dict, ctx: ActionContext) -> ToolResult:
        raise RuntimeError("kaput")


class Flood:
    name = "Flood"
    description = "prints a lot"
    input_schema: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
    writes = False
    runs_commands = False

    def run(self, args: dict, ctx: ActionContext) -> ToolResult:
        return ToolResult("HEAD" + "".join(f"{i:08d}\n" for i in range(20000)) + "TAIL")


def test_a_tool_that_crashes_reports_instead_of_raising(tmp_path: Path) -> None:
    r = make_toolbox_for(tmp_path, (Boom(),)).call("Boom", {})
    assert r.is_error and "RuntimeError: kaput" in r.output


def test_long_output_is_cut_in_the_middle_and_saved_whole_for_read(tmp_path: Path) -> None:
    tb = make_toolbox_for(tmp_path, (Flood(),))
    r = tb.call("Flood", {})
    assert len(r.output) <= OUTPUT_LIMIT
    assert r.output.startswith("HEAD") and r.output.endswith("TAIL")
    assert "characters cut from the middle" in r.output
    saved = next(w for w in r.output.split() if "tool-output" in w)
    full = Path(saved).read_text()
    assert full.count("\n") == 20000 and full.endswith("TAIL")
    back = tb.call("Read", {"file_path": saved, "offset": 10000, "limit": 2})
    assert not back.is_error and "00009999" in back.output and "00010000" in back.output


def test_cap_output_leaves_short_text_alone() -> None:
    assert cap_output("short") == "short"
    long = "a" * 20000 + "b" * 20000
    cut = cap_output(long)
    assert len(cut) <= OUTPUT_LIMIT and cut.startswith("a") and cut.endswith("b")


def test_a_toolbox_without_shell_tools_keeps_files_and_search(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "kernels").mkdir(parents=True)
    pol = SandboxPolicy.optimize(ws, LOCKED, sandbox_uid=None, sandbox_gid=None)
    sb = Sandbox(pol, SandboxStatus(False, "no bubblewrap"), enabled=False)
    box = make_toolbox(ActionContext(sb), shell=False)
    names = {s["function"]["name"] for s in box.schemas()}
    assert names.isdisjoint({"Bash", "BashOutput", "KillBash"})
    assert {"Read", "Write", "Edit", "Glob", "Grep"} <= names
    result = box.call("Bash", {"command": "true"})
    assert result.is_error and "Bash" in result.output

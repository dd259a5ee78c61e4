"""The agent loop with a scripted model: stops, limits, malformed calls, best candidate, Ctrl-C."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_toybox import ToyBox, harness_result

from cuda_agent_cli.agent.events import Event, Stopped, TextDelta, ToolFinished
from cuda_agent_cli.agent.loop import Limits, run_agent
from cuda_agent_cli.agent.session_store import load_session, new_session
from cuda_agent_cli.agent.transcript import read_records
from cuda_agent_cli.errors import Interrupted, ModelUnavailable
from cuda_agent_cli.model.scripted import ScriptedModel, turn


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "kernels").mkdir(parents=True)
    return root


def _run(model, box, ws, tmp_path, **kw):
    state = new_session(data_dir=tmp_path / "data")
    events: list[Event] = []
    kw.setdefault("prompt", "Make Model faster.")
    result = run_agent(
        model,
        box,
        state=state,
        system_prompt="SYSTEM",
        target="m.py::Model",
        settings={"policy": "strict"},
        workspace_root=ws,
        sink=events.append,
        fsync=False,
        **kw,
    )
    return state, result, events


def test_session_runs_tools_until_the_model_answers_without_a_call(ws, tmp_path):
    model = ScriptedModel(
        [
            turn("writing", ("Write", {"file_path": "model_new.py", "content": "class ModelNew: pass"})),
            turn(None, ("Read", {"file_path": "model_new.py"})),
            turn("All done."),
        ]
    )
    state, result, events = _run(model, ToyBox(ws), ws, tmp_path)
    assert result.stop_reason == "done" and result.final_text == "All done."
    assert result.turns == 3
    assert (ws / "model_new.py").read_text() == "class ModelNew: pass"
    # The model saw the Read result in the conversation of its third call.
    tool_msgs = [m for m in model.calls[2] if m["role"] == "tool"]
    assert tool_msgs[-1]["content"] == "class ModelNew: pass"
    assert any(isinstance(e, TextDelta) and e.text == "writing" for e in events)
    assert isinstance(events[-1], Stopped) and events[-1].reason == "done"
    kinds = [r["event"] for r in read_records(state.transcript_path)]
    assert kinds[0] == "session_started" and kinds[-1] == "stopped" and "text_delta" not in kinds


def test_malformed_calls_get_precise_errors_and_nothing_runs(ws, tmp_path):
    box = ToyBox(ws)
    model = ScriptedModel(
        [
            turn(None, ("Write", {"file_path": "a.py"})),
            turn(None, ("Delete", {"file_path": "a.py"})),
            turn(None, ("Read", {"file_path": 3})),
            turn("giving up"),
        ]
    )
    state, result, events = _run(model, box, ws, tmp_path)
    errors = [e.output for e in events if isinstance(e, ToolFinished)]
    assert "missing required argument(s) content" in errors[0]
    assert "Unknown tool 'Delete'" in errors[1] and "Write" in errors[1]
    assert "'file_path' must be string, got int" in errors[2]
    assert box.calls == []


@pytest.mark.parametrize(
    "limits, reason",
    [(Limits(max_turns=2), "max_turns"), (Limits(max_cost=0.25), "max_cost"), (Limits(timeout=0.0), "timeout")],
)
def test_limits_stop_the_session_cleanly(ws, tmp_path, limits, reason):
    model = ScriptedModel([turn(None, ("Read", {"file_path": "x"}), cost=0.2) for _ in range(10)])
    state, result, _ = _run(model, ToyBox(ws), ws, tmp_path, limits=limits)
    assert result.stop_reason == reason
    assert load_session(state.session_id, tmp_path / "data").status == reason
    if reason == "max_turns":
        assert result.turns == 2
    if reason == "max_cost":
        assert result.turns == 2 and result.cost_usd == pytest.approx(0.4)


def test_the_stop_detail_says_where_the_limit_came_from(ws, tmp_path):
    model = ScriptedModel([turn(None, ("Read", {"file_path": "x"}), cost=0.2) for _ in range(10)])
    limits = Limits(max_turns=3, origins={"max_turns": "from pyproject.toml"})
    _, result, events = _run(model, ToyBox(ws), ws, tmp_path, limits=limits)
    assert result.detail == "max_turns 3 from pyproject.toml"
    stopped = [e for e in events if e.kind == "stopped"]
    assert stopped[-1].detail == "max_turns 3 from pyproject.toml"
    model = ScriptedModel([turn(None, ("Read", {"file_path": "x"}), cost=0.2) for _ in range(10)])
    _, result, _ = _run(
        model, ToyBox(ws), ws, tmp_path, limits=Limits(max_cost=0.3, origins={"max_cost": "from --max-cost"})
    )
    assert result.detail == "max_cost $0.3 from --max-cost: spent $0.4000"


def test_best_candidate_is_the_best_measured_not_the_last(ws, tmp_path):
    def write(v):
        return ("Write", {"file_path": "kernels/k.cpp", "content": f"// v{v}"})

    model = ScriptedModel(
        [
            turn(None, write(1)),
            turn(None, ("Profile", {})),
            turn(None, write(2)),
            turn(None, ("Profile", {})),
            turn(None, write(3)),
            turn(None, ("Profile", {})),
            turn(None, write(4)),
            turn(None, ("Profile", {})),
        ]
    )
    box = ToyBox(
        ws,
        profiles=[
            harness_result(reward=1, eager=1.1, compile_=0.9),
            harness_result(reward=3, eager=2.0, compile_=1.5),
            harness_result(reward=3, eager=1.8, compile_=1.2),
            harness_result(correct=False),
        ],
    )
    state, result, _ = _run(model, box, ws, tmp_path)
    assert result.best is not None and result.best.result.timings.speedup_vs_compile == 1.5
    snap = Path(result.best.snapshot)
    assert (snap / "kernels" / "k.cpp").read_text() == "// v2"
    assert (ws / "kernels" / "k.cpp").read_text() == "// v4"
    resumed = load_session(state.session_id, tmp_path / "data")
    assert resumed.best.score == result.best.score and resumed.best.snapshot == str(snap)
    assert json.loads(json.dumps(result.to_json()))["best"]["reward"] == 3


def test_each_harness_result_names_the_kernel_sources_it_judged(ws, tmp_path):
    from cuda_agent_cli.agent.events import HarnessResultEvent
    from cuda_agent_cli.workspace import candidate_digest

    def write(v):
        return ("Write", {"file_path": "kernels/k.cpp", "content": f"// v{v}"})

    seen: list[str | None] = []
    box = ToyBox(
        ws,
        profiles=[harness_result(reward=1), harness_result(reward=1), harness_result(reward=2)],
        hook=lambda name, _args: seen.append(candidate_digest(ws)) if name == "Profile" else None,
    )
    model = ScriptedModel(
        [
            turn(None, write(1)),
            turn(None, ("Profile", {})),
            turn(None, ("Profile", {})),  # the same kernel judged again
            turn(None, write(2)),
            turn(None, ("Profile", {})),
        ]
    )
    state, _, events = _run(model, box, ws, tmp_path)
    sources = [e.sources for e in events if isinstance(e, HarnessResultEvent)]
    assert sources == seen and sources[0] == sources[1] != sources[2] and None not in sources
    assert [r["sources"] for r in load_session(state.session_id, tmp_path / "data").harness_results] == sources


def test_ctrl_c_keeps_everything_and_resume_continues(ws, tmp_path):
    def hook(name, args):
        if args.get("file_path") == "slow":
            raise KeyboardInterrupt

    box = ToyBox(ws, hook=hook)
    model = ScriptedModel(
        [
            turn(None, ("Write", {"file_path": "model_new.py", "content": "v1"})),
            turn(None, ("Read", {"file_path": "model_new.py"}), ("Read", {"file_path": "slow"})),
        ]
    )
    state = new_session(data_dir=tmp_path / "data")
    with pytest.raises(Interrupted) as exc:
        run_agent(model, box, state=state, prompt="go", system_prompt="S", workspace_root=ws, fsync=False)
    assert exc.value.exit_code == 130 and state.session_id in exc.value.one_line()
    loaded = load_session(state.session_id, tmp_path / "data")
    assert loaded.status == "interrupted" and loaded.turns == 2
    # The interrupted call was answered so the conversation stays well formed.
    assert loaded.unanswered_calls() == []
    assert loaded.messages[-1]["role"] == "tool" and "Interrupted" in loaded.messages[-1]["content"]

    box.hook = None
    model2 = ScriptedModel([turn("resumed and done")])
    result = run_agent(model2, box, state=loaded, fsync=False)
    assert result.stop_reason == "done" and result.turns == 3
    sent = model2.calls[0]
    assert sent[0] == {"role": "system", "content": "S"} and sent[1]["content"] == "go"
    # It continues from the tool results: the completed Read, then the interrupted one.
    assert [m["role"] for m in sent[-3:]] == ["assistant", "tool", "tool"]
    assert sent[-2]["content"] == "v1"


class _Killed(BaseException):
    """What the process dying mid-call looks like to the transcript: nothing after it is written."""


@pytest.mark.parametrize("how", ["ctrl-c", "kill"])
def test_a_harness_round_cut_short_is_run_again_on_resume(ws, tmp_path, how):
    from cuda_agent_cli.agent.events import HarnessResultEvent

    stop = KeyboardInterrupt if how == "ctrl-c" else _Killed

    def hook(name, args):
        if name == "Profile":
            raise stop

    timed = harness_result(reward=3, eager=2.0, compile_=1.5)
    box = ToyBox(ws, profiles=[timed], hook=hook)
    model = ScriptedModel(
        [
            turn(None, ("Write", {"file_path": "kernels/k.cpp", "content": "// v1"})),
            turn(None, ("Profile", {}), ("Read", {"file_path": "kernels/k.cpp"})),
        ]
    )
    state = new_session(data_dir=tmp_path / "data")
    with pytest.raises(Interrupted if how == "ctrl-c" else _Killed):
        run_agent(model, box, state=state, prompt="go", system_prompt="S", workspace_root=ws, fsync=False)
    loaded = load_session(state.session_id, tmp_path / "data")
    # The Profile that was running stays open for the resume; the Read after it is answered (Ctrl-C)
    # or open too (a kill writes nothing more).
    open_calls = loaded.unanswered_calls()
    assert open_calls[0][1] == "Profile" and [n for _, n in open_calls] == (
        ["Profile"] if how == "ctrl-c" else ["Profile", "Read"]
    )
    assert loaded.best is None
    profile_id = open_calls[0][0]

    box.hook = None
    events: list[Event] = []
    model2 = ScriptedModel([turn("done")])
    result = run_agent(model2, box, state=loaded, workspace_root=ws, sink=events.append, fsync=False)
    # The Profile ran again, for the same call, before the model was asked anything.
    assert [name for name, _ in box.calls].count("Profile") == 2
    assert any(isinstance(e, HarnessResultEvent) and e.call_id == profile_id for e in events)
    sent = model2.calls[0]
    answers = {m["tool_call_id"]: m["content"] for m in sent if m.get("role") == "tool"}
    assert answers[profile_id] == "reward 3" and loaded.unanswered_calls() == []
    assert result.best is not None and result.best.result.timings.speedup_vs_eager == 2.0


def test_an_interrupted_call_that_is_not_a_harness_round_is_not_run_again(ws, tmp_path):
    def hook(name, args):
        if name == "Write":
            raise KeyboardInterrupt

    box = ToyBox(ws, profiles=[harness_result(reward=3)], hook=hook)
    model = ScriptedModel([turn(None, ("Write", {"file_path": "kernels/k.cpp", "content": "x"}), ("Profile", {}))])
    state = new_session(data_dir=tmp_path / "data")
    with pytest.raises(Interrupted):
        run_agent(model, box, state=state, prompt="go", system_prompt="S", workspace_root=ws, fsync=False)
    loaded = load_session(state.session_id, tmp_path / "data")
    assert loaded.unanswered_calls() == []  # both answered: the Write was cut, the Profile never ran
    box.hook = None
    run_agent(ScriptedModel([turn("done")]), box, state=loaded, workspace_root=ws, fsync=False)
    assert [name for name, _ in box.calls] == ["Write"]


def test_model_failure_is_recorded_before_the_error_propagates(ws, tmp_path):
    model = ScriptedModel([turn(None, ("Read", {"file_path": "x"})), ModelUnavailable("server gone")])
    state = new_session(data_dir=tmp_path / "data")
    with pytest.raises(ModelUnavailable):
        run_agent(model, ToyBox(ws), state=state, prompt="go", fsync=False)
    loaded = load_session(state.session_id, tmp_path / "data")
    assert loaded.status == "error" and "server gone" in loaded.stop_detail and loaded.turns == 1


def test_compaction_keeps_task_rules_best_and_recent_turns(ws, tmp_path):
    big = "x" * 4000
    steps = [turn(None, ("Profile", {}))]
    steps += [turn(f"step {i}", ("Write", {"file_path": f"kernels/k{i}.cpp", "content": big})) for i in range(30)]
    steps += [turn("finished")]
    box = ToyBox(ws, profiles=[harness_result(reward=2, eager=1.7, compile_=1.01)])
    model = ScriptedModel(steps)
    state, result, events = _run(model, box, ws, tmp_path, limits=Limits(context_tokens=8000))
    assert result.stop_reason == "done" and result.compactions >= 1
    last = model.calls[-1]
    assert last[1]["content"] == "Make Model faster."  # the task survives verbatim
    summary = next(m["content"] for m in last if m["role"] == "user" and m["content"].startswith("[Summary"))
    assert "strict" in summary and "reward 2" in summary and "1.70x vs eager" in summary
    assert sum(len(m.get("content") or "") for m in last) < 8000 * 4
    # Every tool result still follows the assistant message that called it.
    ids = set()
    for m in last:
        for c in m.get("tool_calls") or ():
            ids.add(c["id"])
        if m["role"] == "tool":
            assert m["tool_call_id"] in ids
    # A resumed session sees the same compacted conversation.
    assert load_session(state.session_id, tmp_path / "data").messages == state.messages


def test_repeated_call_ids_are_made_unique_and_empty_replies_get_a_nudge(ws, tmp_path):
    from cuda_agent_cli.model.port import AssistantTurn, ToolCall

    same_id = [AssistantTurn(None, [ToolCall("call_0", "Read", {"file_path": "a"})]) for _ in range(2)]
    model = ScriptedModel([*same_id, AssistantTurn(""), AssistantTurn("finished")])
    state, result, _ = _run(model, ToyBox(ws), ws, tmp_path)
    ids = [c["id"] for m in state.messages for c in m.get("tool_calls") or ()]
    assert len(ids) == len(set(ids)) == 2
    assert [m["tool_call_id"] for m in state.messages if m["role"] == "tool"] == ids
    assert result.stop_reason == "done" and result.final_text == "finished"
    assert model.calls[-1][-1]["content"].startswith("Your last reply was empty")


def test_context_overflow_from_the_server_compacts_hard_and_retries(ws, tmp_path):
    from cuda_agent_cli.errors import ContextOverflow

    steps = [turn(f"s{i}", ("Read", {"file_path": "x"})) for i in range(8)]
    steps += [ContextOverflow("too long"), turn("fits now")]
    model = ScriptedModel(steps)
    state, result, _ = _run(model, ToyBox(ws), ws, tmp_path)
    assert result.stop_reason == "done" and result.final_text == "fits now" and result.compactions == 1
    retry = model.calls[-1]
    assert retry[2]["content"].startswith("[Summary") and [m["role"] for m in retry[3:]] == ["assistant", "tool"]


def test_context_overflow_that_compaction_cannot_fix_stops_with_an_error(ws, tmp_path):
    from cuda_agent_cli.errors import ContextOverflow

    model = ScriptedModel([ContextOverflow("the task alone is too long")])
    state = new_session(data_dir=tmp_path / "data")
    with pytest.raises(ContextOverflow):
        run_agent(model, ToyBox(ws), state=state, prompt="huge", fsync=False)
    assert load_session(state.session_id, tmp_path / "data").status == "error"


def test_a_cancel_event_from_another_thread_stops_like_ctrl_c(ws, tmp_path):
    import threading

    cancel = threading.Event()
    box = ToyBox(ws, hook=lambda name, args: cancel.set() if args.get("file_path") == "first" else None)
    model = ScriptedModel(
        [turn(None, ("Read", {"file_path": "first"}), ("Read", {"file_path": "second"})), turn("never asked")]
    )
    state = new_session(data_dir=tmp_path / "data")
    with pytest.raises(Interrupted):
        run_agent(model, box, state=state, prompt="go", fsync=False, cancel=cancel)
    assert [a["file_path"] for _, a in box.calls] == ["first"]
    assert len(model.calls) == 1
    loaded = load_session(state.session_id, tmp_path / "data")
    assert loaded.status == "interrupted" and loaded.unanswered_calls() == []


def test_tool_output_is_capped_and_tighter_for_a_small_context(ws, tmp_path):
    (ws / "big.txt").write_text("A" * 50_000 + "END")
    for budget, cap in ((None, 30_000), (8_192, 8_192)):
        model = ScriptedModel([turn(None, ("Read", {"file_path": "big.txt"}))])
        state, _, _ = _run(model, ToyBox(ws), ws, tmp_path, limits=Limits(context_tokens=budget))
        shown = [m for m in state.messages if m["role"] == "tool"][0]["content"]
        assert len(shown) <= cap and shown.endswith("END") and "cut from the middle" in shown

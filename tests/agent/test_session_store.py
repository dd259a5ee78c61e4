"""The session store: listing, --resume by id or prefix, --continue, torn transcripts, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from agent_toybox import ToyBox, harness_result

from cuda_agent_cli.agent.loop import run_agent
from cuda_agent_cli.agent.session import (
    SessionNotFound,
    list_sessions,
    load_session,
    new_session,
    resume_session,
)
from cuda_agent_cli.model.scripted import ScriptedModel, turn


def _session(data: Path, ws: Path, target: str, profile: dict | None = None, cost: float = 0.01) -> str:
    state = new_session(data_dir=data)
    steps = [turn(None, ("Profile", {}), cost=cost)] if profile else []
    steps.append(turn("done", cost=cost))
    run_agent(
        ScriptedModel(steps),
        ToyBox(ws, profiles=[profile] if profile else []),
        state=state,
        prompt="go",
        system_prompt="S",
        target=target,
        workspace_root=ws,
        fsync=False,
    )
    return state.session_id


@pytest.fixture()
def two_sessions(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    data = tmp_path / "data"
    first = _session(data, ws, "a.py::A", harness_result(reward=3, eager=2.5, compile_=1.4))
    time.sleep(0.02)
    second = _session(data, ws, "b.py::B")
    return data, first, second


def test_list_is_newest_first_with_status_cost_and_best(two_sessions):
    data, first, second = two_sessions
    rows = list_sessions(data)
    assert [r.session_id for r in rows] == [second, first]
    a = rows[1]
    assert (a.target, a.status, a.turns, a.best_reward, a.best_speedup_vs_eager) == ("a.py::A", "done", 2, 3, 2.5)
    assert a.cost_usd == pytest.approx(0.02)
    assert rows[0].best_reward is None and rows[0].turns == 1


def test_resume_by_id_prefix_and_latest(two_sessions):
    data, first, second = two_sessions
    assert resume_session(None, data).session_id == second
    assert resume_session("latest", data).session_id == second
    assert resume_session(first, data).meta["target"] == "a.py::A"
    with pytest.raises(SessionNotFound) as exc:
        resume_session("nope", data)
    assert exc.value.exit_code == 2 and "cuda-agent sessions" in exc.value.one_line()
    common = os.path.commonprefix([first, second])
    with pytest.raises(SessionNotFound, match="matches several"):
        load_session(common, data)
    unique = first[: len(common) + 1]
    assert load_session(unique, data).session_id == first


def test_continue_with_no_sessions_is_a_clear_error(tmp_path):
    with pytest.raises(SessionNotFound, match="no session to continue"):
        resume_session(None, tmp_path)


def test_a_torn_last_line_is_ignored_and_repaired_on_the_next_write(two_sessions, tmp_path):
    data, first, _ = two_sessions
    state = load_session(first, data)
    before = list(state.messages)
    with open(state.transcript_path, "a") as fh:
        fh.write('{"event": "user_message", "content": "half a li')
    again = load_session(first, data)
    assert again.messages == before and again.best is not None
    run_agent(ScriptedModel([turn("more")]), ToyBox(tmp_path), state=again, prompt="follow-up", fsync=False)
    lines = state.transcript_path.read_text().splitlines()
    assert all(json.loads(line) for line in lines)  # every line parses again
    final = load_session(first, data)
    assert final.messages[-2] == {"role": "user", "content": "follow-up"}
    assert final.messages[-1]["content"] == "more" and final.turns == 3


def test_cli_sessions_lists_and_prints_json(two_sessions, tmp_path):
    data, first, second = two_sessions
    env = {**os.environ, "CUDA_AGENT_DATA_DIR": str(data)}
    out = subprocess.run(
        [sys.executable, "-m", "cuda_agent_cli", "sessions", "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=True,
    )
    rows = json.loads(out.stdout)
    assert [r["session_id"] for r in rows] == [second, first]
    assert rows[1]["best_speedup_vs_compile"] == 1.4 and rows[1]["transcript"].endswith("transcript.jsonl")
    table = subprocess.run(
        [sys.executable, "-m", "cuda_agent_cli", "sessions"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=True,
    ).stdout
    line = next(ln for ln in table.splitlines() if ln.startswith(first))
    assert "a.py::A" in line and "done" in line and "2.50x" in line and "1.40x" in line

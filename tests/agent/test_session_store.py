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
from cuda_agent_cli.agent.session_store import (
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


# -- repositories: what `sessions` shows and `--continue` picks -----------------------------------


def _repo_session(data: Path, ws: Path, repo: Path, target: str, chat: bool = False, old: bool = False) -> str:
    """A finished session started in `repo`; `old`: recorded before settings held "repo" (only
    task.json says where optimize ran)."""
    state = new_session(data_dir=data)
    settings = {"command": "chat" if chat else "optimize"}
    if old:
        (state.session_dir / "task.json").write_text(json.dumps({"target": target, "cwd": str(repo / "sub")}))
    else:
        settings["repo"] = str(repo)
    run_agent(
        ScriptedModel([turn("done")]),
        ToyBox(ws),
        state=state,
        prompt="go",
        system_prompt="S",
        target=target,
        settings=settings,
        workspace_root=ws,
        fsync=False,
    )
    time.sleep(0.02)  # distinct transcript times: newest first is well defined
    return state.session_id


@pytest.fixture()
def two_repos(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    data = tmp_path / "data"
    repos = {}
    for name in ("alpha", "beta"):
        (tmp_path / name / ".git").mkdir(parents=True)
        (tmp_path / name / "sub").mkdir()
        repos[name] = tmp_path / name
    ids = {
        "alpha": _repo_session(data, ws, repos["alpha"], "m.py::A", old=True),
        "alpha-chat": _repo_session(data, ws, repos["alpha"], "chat alpha", chat=True),
        "beta": _repo_session(data, ws, repos["beta"], "m.py::B"),
        "beta-chat": _repo_session(data, ws, repos["beta"], "chat beta", chat=True),
    }
    return data, repos, ids


def test_each_session_knows_its_repository(two_repos):
    from cuda_agent_cli.task.target import repository_of

    data, repos, ids = two_repos
    rows = {r.session_id: r for r in list_sessions(data)}
    assert rows[ids["alpha"]].repo == str(repos["alpha"].resolve())  # from task.json's folder, alpha/sub
    assert rows[ids["beta"]].repo == str(repos["beta"]) and rows[ids["beta-chat"]].to_json()["repo"] == str(
        repos["beta"]
    )
    assert repository_of(repos["alpha"] / "sub") == repos["alpha"].resolve()


def test_continue_takes_the_newest_session_of_this_repository(two_repos, tmp_path):
    from cuda_agent_cli.chat.session import latest_chat_session
    from cuda_agent_cli.run.optimize import OptimizeRequest, resumed_session
    from cuda_agent_cli.task.target import repository_of

    data, repos, ids = two_repos
    # The newest session of all is beta's chat; from alpha (or a folder in it) --continue is alpha's.
    assert resume_session(None, data).session_id == ids["beta-chat"]
    here = OptimizeRequest(target=None, cwd=repos["alpha"] / "sub", continue_latest=True)
    assert resumed_session(here, data).session_id == ids["alpha"]
    there = OptimizeRequest(target=None, cwd=repos["beta"], continue_latest=True)
    assert resumed_session(there, data).session_id == ids["beta"]  # optimize skips the newer chat
    assert latest_chat_session(data, repository_of(repos["alpha"])).session_id == ids["alpha-chat"]
    elsewhere = tmp_path / "gamma"
    (elsewhere / ".git").mkdir(parents=True)
    with pytest.raises(SessionNotFound) as exc:
        resumed_session(OptimizeRequest(target=None, cwd=elsewhere, continue_latest=True), data)
    assert exc.value.exit_code == 2
    assert exc.value.one_line() == (
        f"there is no session of {elsewhere.resolve()} to continue — "
        "`cuda-agent sessions` lists every repository's; pass one with --resume ID"
    )


def _cli(*args: str) -> tuple[int, str, str]:
    import contextlib
    import io

    from cuda_agent_cli.cli.entry import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), pytest.raises(SystemExit) as done:
        main(list(args))
    return int(done.value.code or 0), out.getvalue(), err.getvalue()


def test_cli_sessions_shows_the_repository_of_each(two_repos, monkeypatch):
    data, repos, ids = two_repos
    monkeypatch.setenv("CUDA_AGENT_DATA_DIR", str(data))
    code, out, _ = _cli("sessions")
    assert code == 0 and out.splitlines()[0].split()[:5] == ["ID", "KIND", "DATE", "REPOSITORY", "TARGET"]
    beta = next(ln for ln in out.splitlines() if ln.startswith(ids["beta"]))
    alpha = next(ln for ln in out.splitlines() if ln.startswith(ids["alpha"]))
    assert f" {repos['beta']} " in beta and f" {repos['alpha'].resolve()} " in alpha
    assert "--continue takes the latest of the repository you are in" in out
    code, out, _ = _cli("sessions", "--limit", "1")
    assert code == 0 and sum(ln.startswith(tuple(ids.values())) for ln in out.splitlines()) == 1
    code, out, _ = _cli("sessions", "--all", "--json")
    rows = json.loads(out)
    assert isinstance(rows, list) and len(rows) == 4 and rows[0]["repo"] == str(repos["beta"])


@pytest.mark.parametrize("limit", ["-3", "0"])
def test_cli_sessions_refuses_a_limit_below_one(two_repos, monkeypatch, limit):
    data, _, _ = two_repos
    monkeypatch.setenv("CUDA_AGENT_DATA_DIR", str(data))
    code, out, err = _cli("sessions", "--limit", limit)
    assert code == 2 and out == ""
    assert err.splitlines() == [
        f"error: --limit {limit}: the number of sessions to show must be 1 or more — pass a positive --limit "
        "(the default is 20), or --all to show every session"
    ]


def test_cli_sessions_json_help_says_what_it_prints():
    from typer.testing import CliRunner

    from cuda_agent_cli.cli.app import app

    text = " ".join(CliRunner().invoke(app, ["sessions", "-h"]).output.split())
    assert "--json Print a JSON array instead of text: one object per session, newest first" in text
    assert "Print one JSON object" not in text


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full, where every write finds the disk full")
def test_a_full_disk_under_the_transcript_is_no_space_left_exit_3(tmp_path):
    from cuda_agent_cli.errors import NoSpaceLeft

    state = new_session(data_dir=tmp_path / "data")
    state.transcript_path.symlink_to("/dev/full")
    with pytest.raises(NoSpaceLeft) as exc:
        run_agent(ScriptedModel([turn("done")]), ToyBox(tmp_path), state=state, prompt="go", fsync=False)
    assert exc.value.exit_code == 3
    assert exc.value.one_line().startswith(
        f"cannot write the session transcript {state.transcript_path}: no space left on the device — free some space"
    )


def test_a_harness_result_is_its_json_object_in_the_transcript_and_typed_when_read_back(tmp_path: Path) -> None:
    from cuda_agent_cli.agent.events import HarnessResultEvent, event_from_dict, event_to_dict
    from cuda_agent_cli.harness_result import HarnessResult

    result = HarnessResult.from_json(harness_result(reward=3, eager=2.0, compile_=1.5)).as_recorded()
    line = event_to_dict(HarnessResultEvent("c1", "Profile", 2, result, True, "/snap", "abc"))
    assert line["result"] == result.to_json()
    back = event_from_dict(json.loads(json.dumps(line)))
    assert isinstance(back, HarnessResultEvent) and back.result == result and back.sources == "abc"
    # A line whose result cannot be read back is skipped, as an unreadable line is.
    assert event_from_dict({**line, "result": {"timings": {"eager_us": 1.0}}}) is None

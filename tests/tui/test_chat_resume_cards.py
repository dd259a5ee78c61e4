"""A resumed chat shows its harness results as cards again, where they were: the /optimize session
that made them, each card as it looked live (best marked as it was then), and the ledger."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from chat_helpers import chat_app, make_repo, plain, replay_file, run, runtime, texts, type_and_send, wait_for  # noqa: E402

from cuda_agent_cli.agent import events as ev  # noqa: E402
from cuda_agent_cli.harness_result import HarnessResult  # noqa: E402
from cuda_agent_cli.tui.widgets import HarnessCard, LedgerPanel  # noqa: E402

COMPILED = {
    "compiled": True,
    "correct": False,
    "reward": None,
    "device": "cpu",
    "policy": "strict",
    "errors": [],
    "warnings": [],
    "checks": [],
    "timings": None,
    "environment": {"gpu": None, "torch": "2.5", "cuda": None},
}
WRONG = {
    **COMPILED,
    "correct": False,
    "reward": -1,
    "checks": [{"name": "outputs", "passed": False, "detail": "max abs diff 0.31 at [0, 7]"}],
}
PROFILED = {
    **COMPILED,
    "correct": True,
    "reward": 3,
    "checks": [{"name": "outputs", "passed": True, "detail": ""}],
    "warnings": ["the machine was busy while timing"],
    "timings": {
        "eager_us": 120.0,
        "compile_us": 90.0,
        "candidate_us": 40.0,
        "speedup_vs_eager": 3.0,
        "speedup_vs_compile": 2.25,
        "method": "wall",
        "trials": 50,
        "speedup_vs_eager_interval": [2.9, 3.1],
        "speedup_vs_compile_interval": [2.2, 2.3],
        "uncertain": False,
    },
}


def _cards(app) -> list[tuple[str, bool, str]]:
    return [(c.result.reward, c.best, plain(c.content)) for c in app.query(HarnessCard)]


def test_resumed_chat_brings_back_the_cards_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    repo = make_repo(tmp_path / "repo")
    model = replay_file(
        tmp_path / "r.jsonl",
        [
            {"content": "Answer one.", "tool_calls": []},
            {"content": "Answer two.", "tool_calls": []},
            {"content": "Answer three.", "tool_calls": []},
        ],
    )
    rt = runtime(repo, f"replay:{model}", tmp_path / "data")
    app = chat_app(rt)
    live: dict[str, object] = {}

    async def go():
        async with app.run_test(size=(140, 45)) as pilot:
            await type_and_send(pilot, app, "first")
            await wait_for(pilot, lambda: app.busy is None and "Answer one." in texts(app), what="turn 1")
            # What the worker tells the app while /optimize runs: its session, then each harness result.
            await app.show_event(ev.SessionStarted("opt-session-1", "blocks.py::Block", "replay:x", None, {}, ""))
            for i, result in enumerate((COMPILED, WRONG, PROFILED)):
                await app.show_event(
                    ev.HarnessResultEvent(
                        f"c{i}",
                        ("Compile", "Verify", "Profile")[i],
                        i + 1,
                        HarnessResult.from_json(result),
                        result is PROFILED,
                    )
                )
            app.event_session = None
            await type_and_send(pilot, app, "second")
            await wait_for(pilot, lambda: app.busy is None and "Answer two." in texts(app), what="turn 2")
            live["cards"] = _cards(app)
            live["status"] = plain(app.query_one("#status").content)

    run(go())
    rt.close()
    assert [c[0] for c in live["cards"]] == [None, -1, 3]

    monkeypatch.chdir(repo)  # --continue takes the latest chat of the repository it runs in
    for resumed in (
        runtime(None, f"replay:{model}", tmp_path / "data", resume=rt.session_id),
        runtime(None, f"replay:{model}", tmp_path / "data", continue_latest=True),
    ):
        app2 = chat_app(resumed)

        async def go2():
            async with app2.run_test(size=(140, 45)) as pilot:
                await pilot.pause()
                assert _cards(app2) == live["cards"]  # the same cards, best marked as it was
                shown = texts(app2)
                order = [
                    "› first",
                    "Answer one.",
                    "optimize session opt-session-1 started for blocks.py::Block",
                    "max abs diff 0.31",
                    "3.00x",
                    "› second",
                    "Answer two.",
                ]
                at = [shown.index(s) for s in order]
                assert at == sorted(at), shown
                assert app2.query_one(LedgerPanel).row_count == 3
                assert "3.00x eager, 2.25x compile" in plain(app2.query_one("#status").content)
                assert live["status"].split(" · best ")[1].startswith("3.00x eager")

        run(go2())
        resumed.close()

"""What a chat session knows about itself across its life and a resume: what it changed in the
repository (/diff), what /undo can take back, the conversation of its /optimize runs, and the
best speedup the status bar shows."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from chat_helpers import chat_app, git, make_repo, replay_file, run, runtime, texts, type_and_send, wait_for  # noqa: E402


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"a.py": "x = 1\n", "b.py": "b = 1\n"})


def test_diff_shows_what_the_session_changed_since_it_started(repo, tmp_path):
    # Before the chat: b.py has uncommitted work and notes.txt is untracked; neither is the session's.
    (repo / "b.py").write_text("b = 'mine'\n")
    (repo / "notes.txt").write_text("my notes\n")
    model = replay_file(
        tmp_path / "r.jsonl",
        [
            {
                "content": None,
                "tool_calls": [
                    {"name": "Edit", "arguments": {"file_path": "a.py", "old_string": "x = 1", "new_string": "x = 7"}},
                    {"name": "Write", "arguments": {"file_path": "made_by_agent.py", "content": "made = True\n"}},
                ],
            },
            {"content": "Done.", "tool_calls": []},
        ],
    )
    rt = runtime(repo, f"replay:{model}", tmp_path / "data", mode="yolo")
    app = chat_app(rt)
    index = repo / ".git" / "index"

    async def go():
        async with app.run_test(size=(140, 45)) as pilot:
            await type_and_send(pilot, app, "change a and add a file")
            await wait_for(pilot, lambda: app.busy is None and "Done." in texts(app), what="the turn")
            # A kernel applied with `y` lands as a commit on a new branch: the session's too.
            (repo / "kernel.cu").write_text("// fused\n")
            git(repo, "checkout", "-qb", "cuda-agent/block-1")
            git(repo, "add", "kernel.cu")
            git(repo, "commit", "-qm", "cuda-agent: Block")
            stamp = index.stat().st_mtime_ns
            await type_and_send(pilot, app, "/diff")
            shown = await wait_for(pilot, lambda: "left out" in texts(app) and texts(app), what="the diff")
            assert "+x = 7" in shown and "-x = 1" in shown  # the agent's edit, uncommitted
            assert "+made = True" in shown  # a file the agent created, untracked
            assert "+// fused" in shown  # the commit the session applied
            assert "b = 'mine'" not in shown and "my notes" not in shown  # the user's own, from before
            assert "left out 2 files that already had uncommitted changes" in shown
            assert "b.py, notes.txt" in shown
            assert index.stat().st_mtime_ns == stamp and not git(repo, "diff", "--cached").strip()

    run(go())
    rt.close()
    # A resumed chat compares with where the repository stood when the session started.
    again = runtime(None, f"replay:{model}", tmp_path / "data", resume=rt.session_id)
    d = again.session_diff()
    again.close()
    assert "+made = True" in d.patch and "+// fused" in d.patch and d.left_out == ["b.py", "notes.txt"]


# -- /optimize in the chat, with the session runner's place taken by a recorded session ----------

BLOCKS = "import torch\n\n\nclass Block(torch.nn.Module):\n    pass\n"
OPT_SID = "20260101-120500-0a0b0c"


def _result(reward, eager=None, comp=None):
    timings = None
    if eager:
        timings = {
            "eager_us": 100.0,
            "compile_us": 80.0,
            "candidate_us": 100.0 / eager,
            "speedup_vs_eager": eager,
            "speedup_vs_compile": comp,
            "method": "wall",
            "trials": 10,
            "speedup_vs_eager_interval": [eager * 0.98, eager * 1.02],
            "speedup_vs_compile_interval": [comp * 0.98, comp * 1.02],
            "uncertain": False,
        }
    return {
        "compiled": True,
        "correct": reward is not None and reward > 0,
        "reward": reward,
        "device": "cpu",
        "policy": "strict",
        "errors": [],
        "warnings": [],
        "checks": [],
        "timings": timings,
        "environment": {"gpu": None, "torch": "2.5", "cuda": None},
    }


def fake_optimize(rt, data: Path, sid: str = OPT_SID):
    """`rt.optimize` as the runner does it: the session's events to its transcript and the sink,
    then the outcome with a plan the review screen can apply."""
    import hashlib
    from types import SimpleNamespace

    from cuda_agent_cli.agent import events as ev
    from cuda_agent_cli.agent.session_store import sessions_root
    from cuda_agent_cli.agent.transcript import TranscriptWriter
    from cuda_agent_cli.harness_result import HarnessResult
    from cuda_agent_cli.writeback.apply import WriteBackPlan
    from cuda_agent_cli.writeback.diff import FileChange, unified_patch

    profiled = _result(3, 2.5, 1.8)
    events = [
        ev.SessionStarted(sid, "blocks.py::Block", rt.model_string, None, {}, ""),
        ev.UserMessage("Optimize blocks.py::Block (the task)"),
        ev.AssistantMessage(
            1, "Writing a fused kernel for **Block**.", [{"id": "k1", "name": "Profile", "arguments": {}}]
        ),
        ev.ToolStarted("k1", "Profile", {}),
        ev.ToolFinished("k1", "Profile", "reward 3: 2.50x eager", False, profiled, 0.5),
        ev.HarnessResultEvent("k1", "Profile", 1, HarnessResult.from_json(profiled), True),
        ev.AssistantMessage(2, "The fused kernel is 2.5x faster than eager.", []),
        ev.Stopped("done", "", 2, 0.0),
    ]

    def optimize(args, sink, cancel):
        with TranscriptWriter(sessions_root(data) / sid / "transcript.jsonl") as write:
            for e in events:
                write(e)
                sink(e)
        root = rt.root
        new = BLOCKS + "\nfrom ._cuda_agent.block.loader import use_kernel\nuse_kernel(Block)\n"
        changes = [
            FileChange("blocks.py", new, BLOCKS),
            FileChange("_cuda_agent/block/kernel.cu", "// fused\n"),
            FileChange(".cuda-agent/kernels.toml", '[[kernel]]\ntarget = "blocks.py::Block"\n'),
        ]
        plan = WriteBackPlan(
            repo_root=root,
            in_git=True,
            module_rel="blocks.py",
            module_sha256=hashlib.sha256((root / "blocks.py").read_bytes()).hexdigest(),
            changes=changes,
            patch=unified_patch(changes),
            branch=f"cuda-agent/block-{sid[-6:]}",
            commit_message="cuda-agent: a kernel for Block",
            folder="_cuda_agent/block",
        )
        return SimpleNamespace(
            target="blocks.py::Block",
            session_id=sid,
            device="cpu",
            result=HarnessResult.from_json(profiled),
            plan=plan,
            status="improved",
            stop_reason="done",
        )

    rt.optimize = optimize


@pytest.fixture
def blocks_repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "proj", {"blocks.py": BLOCKS})


async def optimize_and_apply(pilot, app) -> None:
    from cuda_agent_cli.tui.screens import ReviewScreen

    await type_and_send(pilot, app, "/optimize blocks.py::Block")
    await wait_for(pilot, lambda: isinstance(app.screen, ReviewScreen), what="the review")
    await pilot.press("y")
    await wait_for(pilot, lambda: "applied: committed" in texts(app), what="the apply")


def test_undo_after_a_resume_reverts_the_kernel_the_session_committed(blocks_repo, tmp_path, monkeypatch):
    model = replay_file(tmp_path / "r.jsonl", [])
    data = tmp_path / "data"
    rt = runtime(blocks_repo, f"replay:{model}", data)
    fake_optimize(rt, data)
    app = chat_app(rt)

    async def go():
        async with app.run_test(size=(140, 45)) as pilot:
            await optimize_and_apply(pilot, app)
            await type_and_send(pilot, app, "/quit")

    run(go())
    rt.close()
    applied = git(blocks_repo, "rev-parse", "HEAD").strip()
    assert (blocks_repo / ".cuda-agent" / "kernels.toml").exists()

    monkeypatch.chdir(blocks_repo)  # --continue takes the latest chat of the repository it runs in
    again = runtime(None, f"replay:{model}", data, continue_latest=True)
    app2 = chat_app(again)

    async def go2():
        async with app2.run_test(size=(140, 45)) as pilot:
            await pilot.pause()
            await type_and_send(pilot, app2, "/undo")
            await wait_for(pilot, lambda: f"reverted commit {applied[:10]}" in texts(app2), what="the undo")
            shown = texts(app2)
            assert "the kernel for blocks.py" in shown and "_cuda_agent/block/kernel.cu" in shown
            await type_and_send(pilot, app2, "/undo")
            await wait_for(pilot, lambda: "nothing to undo" in texts(app2), what="the second undo")

    run(go2())
    again.close()
    assert not (blocks_repo / ".cuda-agent" / "kernels.toml").exists()
    assert (blocks_repo / "blocks.py").read_text() == BLOCKS
    assert git(blocks_repo, "log", "-1", "--format=%s").startswith("Revert")


def test_resumed_chat_shows_the_optimize_conversation_and_what_was_applied(blocks_repo, tmp_path):
    from cuda_agent_cli.tui.widgets import HarnessCard, ToolCallLine

    model = replay_file(
        tmp_path / "r.jsonl",
        [{"content": "Answer one.", "tool_calls": []}, {"content": "Answer two.", "tool_calls": []}],
    )
    data = tmp_path / "data"
    rt = runtime(blocks_repo, f"replay:{model}", data)
    fake_optimize(rt, data)
    app = chat_app(rt)

    async def go():
        async with app.run_test(size=(140, 45)) as pilot:
            await type_and_send(pilot, app, "first")
            await wait_for(pilot, lambda: app.busy is None and "Answer one." in texts(app), what="turn 1")
            await optimize_and_apply(pilot, app)
            await type_and_send(pilot, app, "/undo")
            await wait_for(pilot, lambda: "reverted commit" in texts(app), what="the undo")
            await type_and_send(pilot, app, "second")
            await wait_for(pilot, lambda: app.busy is None and "Answer two." in texts(app), what="turn 2")

    run(go())
    rt.close()
    again = runtime(None, f"replay:{model}", data, resume=rt.session_id)
    app2 = chat_app(again)

    async def go2():
        async with app2.run_test(size=(140, 45)) as pilot:
            await pilot.pause()
            shown = texts(app2)
            order = [
                "› first",
                "Answer one.",
                "› /optimize blocks.py::Block",
                f"optimize session {OPT_SID} started for blocks.py::Block",
                "Writing a fused kernel for **Block**.",
                "Profile",
                "2.50x",
                "The fused kernel is 2.5x faster than eager.",
                "applied: committed",
                "reverted commit",
                "› second",
                "Answer two.",
            ]
            at = [shown.find(s) for s in order]
            assert -1 not in at and at == sorted(at), list(zip(order, at))
            assert len(app2.query(HarnessCard)) == 1  # the card once, in its session's conversation
            line = app2.query_one(ToolCallLine)
            assert line.tool == "Profile" and line.status == "ok" and "2.50x eager" in line.output

    run(go2())
    again.close()


def test_undo_of_the_applied_kernel_clears_the_best_speedup_in_status_and_ledger(blocks_repo, tmp_path):
    from chat_helpers import plain

    from cuda_agent_cli.tui.widgets import LedgerPanel

    model = replay_file(tmp_path / "r.jsonl", [])
    data = tmp_path / "data"
    rt = runtime(blocks_repo, f"replay:{model}", data)
    fake_optimize(rt, data)
    app = chat_app(rt)

    def best() -> str:
        return plain(app.query_one("#status").content).split(" · best ")[1]

    def ledger_marks(a) -> list[str]:
        panel = a.query_one(LedgerPanel)
        return [plain(panel.get_row_at(i)[0]) for i in range(panel.row_count)]

    async def go():
        async with app.run_test(size=(140, 45)) as pilot:
            await optimize_and_apply(pilot, app)
            assert best().startswith("2.50x eager") and ledger_marks(app) == ["★1"]
            await type_and_send(pilot, app, "/undo")
            await wait_for(pilot, lambda: "reverted commit" in texts(app), what="the undo")
            await pilot.pause()
            assert best().startswith("-"), best()
            assert "2.50x" not in best() and ledger_marks(app) == ["↶1"]
            assert "no longer count as the best" in texts(app)

    run(go())
    rt.close()
    again = runtime(None, f"replay:{model}", data, resume=rt.session_id)
    assert again.ledger.best() is None and again.ledger.best_verified_speedup() == "-"
    again.close()

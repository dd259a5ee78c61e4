"""`/optimize` inside the chat on the CPU device: the recorded demo session against the real
harness, harness cards and the ledger, the review screen, apply into a git repository, /undo,
and a resume that brings the ledger back."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from chat_helpers import (  # noqa: E402
    MODELS,
    chat_app,
    git,
    plain,
    replay_turns,
    run,
    runtime,
    scripted_model,
    texts,
    type_and_send,
    wait_for,
)

from cuda_agent_cli import demo  # noqa: E402
from cuda_agent_cli.tui.screens import ReviewScreen  # noqa: E402
from cuda_agent_cli.tui.widgets import HarnessCard, LedgerPanel  # noqa: E402
from cuda_agent_cli.writeback.git import init_repo  # noqa: E402

pytestmark = pytest.mark.integration
OPTIMIZE = f'/optimize {demo.EXAMPLE}::{demo.CLASS} --inputs "{demo.INPUTS["cpu"]}" --device cpu'


@pytest.fixture
def demo_repo(tmp_path: Path, harness_cache: Path) -> Path:
    root = tmp_path / "project"
    demo.copy_example(root)
    init_repo(root, "example")
    return root


@pytest.mark.parametrize("kind", MODELS)
def test_optimize_in_chat_reviews_applies_undoes_and_resumes(kind: str, demo_repo: Path, tmp_path: Path):
    # The recorded demo session, from the replay model or streamed by the fake server.
    turns = replay_turns(demo.replay_path("cpu"))
    with scripted_model(kind, turns, tmp_path / "demo.jsonl") as model:
        rt = runtime(demo_repo, data=tmp_path / "data", device="cpu", **model)
        app = chat_app(rt)
        base = git(demo_repo, "rev-parse", "HEAD").strip()

        async def go():
            async with app.run_test(size=(140, 45)) as pilot:
                await type_and_send(pilot, app, OPTIMIZE)
                review = await wait_for(
                    pilot,
                    lambda: isinstance(app.screen, ReviewScreen) and app.screen.query("#review-diff") and app.screen,
                    timeout=400,
                    what="the review screen",
                )
                table = plain(review.query_one("#review-table").content)
                assert "eager PyTorch" in table and "torch.compile" in table and "spread" in table
                facts = plain(review.query_one("#review-facts").content)
                assert "method:" in facts and "GPU: none (cpu)" in facts
                diff = plain(review.query_one("#review-diff").content, width=1000)
                plan = review.outcome.plan
                # the whole patch is there, not cut: every line of it appears in the view
                assert all(line.rstrip() in diff for line in plan.patch.splitlines()[:400] if line.strip())
                assert len(diff.splitlines()) >= len(plan.patch.splitlines())
                await pilot.press("y")
                # Applying may build the kernel for the repository: slow beside other tests.
                await wait_for(pilot, lambda: "applied: committed" in texts(app), timeout=180, what="apply")
                cards = list(app.query(HarnessCard))
                assert [c.result.compiled for c in cards] == [True, True, True]
                assert cards[-1].result.timings and cards[-1].best
                ledger = app.query_one(LedgerPanel)
                assert ledger.row_count == 1  # three results of one kernel: one candidate
                assert "x eager" in plain(app.query_one("#status").content)
                head = git(demo_repo, "rev-parse", "HEAD").strip()
                assert head != base and ".cuda-agent/kernels.toml" in git(demo_repo, "show", "--name-only", head)
                await type_and_send(pilot, app, "/undo")
                await wait_for(pilot, lambda: f"reverted commit {head[:10]}" in texts(app), what="undo")
                assert not (demo_repo / ".cuda-agent" / "kernels.toml").exists()
                assert "Revert" in git(demo_repo, "log", "-1", "--format=%s")

        run(go())
        rt.close()
        again = runtime(None, data=tmp_path / "data", resume=rt.session_id, device="cpu", **model)
        assert [j.tool for j in again.ledger.judged] == ["Compile", "Verify", "Profile"]
        assert [len(c.judged) for c in again.ledger.candidates] == [1 * 3]  # chat.json keeps the sources
        # The kernel was applied and undone: its candidate stays in the ledger, no longer the best.
        assert again.ledger.best() is None and all(c.reverted for c in again.ledger.candidates)
        assert again.ledger.best(with_reverted=True).tool == "Profile"
        assert again.optimize_sessions and again.optimize_sessions[0] != again.session_id

"""`cuda-agent optimize` on a terminal: the recorded demo session on the CPU device, run by the one
session runner with the TUI as its sink, to the review screen; `y` lands the kernel through the
optimize command's own write-back (branch, commit, manifest), `n` writes nothing."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from chat_helpers import git, plain, run, texts, wait_for  # noqa: E402
from rich.console import Console  # noqa: E402

from cuda_agent_cli import demo  # noqa: E402
from cuda_agent_cli.cli.optimize import ReviewOptions, finish_tui, tui_app  # noqa: E402
from cuda_agent_cli.run.optimize import ApplyIntent, OptimizeRequest  # noqa: E402
from cuda_agent_cli.tui.screens import ReviewScreen  # noqa: E402
from cuda_agent_cli.tui.widgets import HarnessCard, LedgerPanel  # noqa: E402
from cuda_agent_cli.writeback.git import init_repo  # noqa: E402

pytestmark = pytest.mark.integration


@pytest.fixture
def demo_repo(tmp_path: Path, harness_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    root = tmp_path / "project"
    demo.copy_example(root)
    init_repo(root, "example")
    return root


def _request(root: Path) -> OptimizeRequest:
    req = OptimizeRequest(
        target=f"{demo.EXAMPLE}::{demo.CLASS}",
        cwd=root,
        model=f"replay:{demo.replay_path('cpu')}",
        device="cpu",
        inputs=demo.INPUTS["cpu"],
    )
    req.apply = ApplyIntent()  # what `optimize` sets when the review may end in applying
    return req


def _review_to(root: Path, key: str) -> tuple[int, str, object]:
    """Run the app to its review screen, answer `key`, and finish as the command does."""
    opts = ReviewOptions()
    app = tui_app(_request(root), opts, detect=lambda: "cpu")
    seen: dict[str, object] = {}

    async def go() -> None:
        async with app.run_test(size=(150, 45)) as pilot:
            await pilot.pause()  # the ledger is mounted after the first frame, open
            assert app.query_one("#ledger").display
            review = await wait_for(
                pilot,
                lambda: isinstance(app.screen, ReviewScreen) and app.screen.query("#review-diff") and app.screen,
                timeout=400,
                what="the review screen",
            )
            seen["cards"] = [c.result.compiled for c in app.screen_stack[0].query(HarnessCard)]
            seen["ledger_rows"] = app.query_one(LedgerPanel).row_count
            seen["conversation"] = texts(app)
            seen["table"] = plain(review.query_one("#review-table").content)
            seen["facts"] = plain(review.query_one("#review-facts").content)
            seen["diff"] = plain(review.query_one("#review-diff").content, width=1000)
            seen["keys"] = plain(review.query_one("#review-keys").content)
            seen["patch"] = review.outcome.plan.patch
            await pilot.press(key)
            await wait_for(pilot, lambda: not app.is_running, timeout=30, what="the app to close")

    run(go())
    out = io.StringIO()
    console = Console(file=out, width=200)
    code = finish_tui(app, opts, console, console)
    return code, out.getvalue(), seen


def _assert_review(seen: dict) -> None:
    # Compile, Verify and Profile judged one kernel: three cards, one candidate.
    assert seen["cards"] == [True, True, True] and seen["ledger_rows"] == 1
    assert "optimize session" in seen["conversation"]
    table = seen["table"]
    assert "eager PyTorch" in table and "torch.compile" in table and "kernel" in table and "spread" in table
    assert "method:" in seen["facts"] and "GPU: none (cpu)" in seen["facts"]
    assert "y: apply (branch, commit, manifest) · n: discard" in seen["keys"]
    # the whole patch, never cut
    assert all(line.rstrip() in seen["diff"] for line in seen["patch"].splitlines() if line.strip())


def test_optimize_in_the_tui_applies_with_y(demo_repo: Path):
    base = git(demo_repo, "rev-parse", "HEAD").strip()
    code, printed, seen = _review_to(demo_repo, "y")
    _assert_review(seen)
    assert code == 0
    head = git(demo_repo, "rev-parse", "HEAD").strip()
    assert head != base
    branch = git(demo_repo, "rev-parse", "--abbrev-ref", "HEAD").strip()
    assert branch.startswith("cuda-agent/pooled_layer_norm-")
    assert ".cuda-agent/kernels.toml" in git(demo_repo, "show", "--name-only", "--format=", head)
    assert git(demo_repo, "status", "--porcelain") == ""
    # What stays in the terminal after the app: the result and where it landed.
    assert f"committed {head[:10]} on new branch {branch}" in printed
    assert "vit_head.py::PooledLayerNorm · " in printed and "x vs torch.compile (reward" in printed


def test_optimize_in_the_tui_discards_with_n(demo_repo: Path):
    base = git(demo_repo, "rev-parse", "HEAD").strip()
    code, printed, seen = _review_to(demo_repo, "n")
    _assert_review(seen)
    assert code == 0  # a correct kernel was found; not applying it is the user's choice
    assert git(demo_repo, "rev-parse", "HEAD").strip() == base
    assert git(demo_repo, "status", "--porcelain") == ""
    assert "not applied" in printed and "committed" not in printed


def _cards(screen) -> list[tuple[str, bool]]:
    """Each harness card's title line (tool, candidate number, best so far) and its best mark."""
    return [(plain(c.content).splitlines()[0], c.best) for c in screen.query(HarnessCard)]


def test_a_resumed_optimize_shows_its_earlier_conversation_and_ledger(demo_repo: Path):
    """`optimize --resume ID` on a terminal: the turns and candidates of the stopped session are
    on screen from the first frame, as `chat --resume` shows a chat's, and the run goes on below."""
    first = _request(demo_repo)
    first.max_turns = 5  # Read, two Writes, Compile, Verify; the Profile is left for the resume
    app1 = tui_app(first, ReviewOptions(), detect=lambda: "cpu")
    live: dict[str, object] = {}

    async def stopped() -> None:
        async with app1.run_test(size=(150, 45)) as pilot:
            await wait_for(pilot, lambda: app1.outcome is not None, timeout=400, what="the first session's end")
            await pilot.pause()
            live["cards"] = _cards(app1.screen_stack[0])
            live["sid"] = app1.outcome.session_id
            live["stop"] = app1.outcome.stop_reason
            await pilot.press("n" if isinstance(app1.screen, ReviewScreen) else "q")
            await wait_for(pilot, lambda: not app1.is_running, timeout=30, what="the app to close")

    run(stopped())
    sid = str(live["sid"])
    assert live["stop"] == "max_turns" and len(live["cards"]) == 2  # type: ignore[arg-type]

    req = OptimizeRequest(target=None, cwd=demo_repo, resume=sid)
    req.apply = ApplyIntent()
    app = tui_app(req, ReviewOptions(), detect=lambda: "cpu")
    seen: dict[str, object] = {}

    async def go() -> None:
        async with app.run_test(size=(150, 45)) as pilot:
            await pilot.pause()  # the first frame, the ledger mounted after it
            seen["before"] = texts(app)
            seen["cards_before"] = _cards(app.screen)
            seen["rows_before"] = app.query_one(LedgerPanel).row_count
            await wait_for(
                pilot,
                lambda: isinstance(app.screen, ReviewScreen) and app.screen.query("#review-diff"),
                timeout=400,
                what="the review screen",
            )
            main = app.screen_stack[0]
            seen["after"] = texts(app, main.query_one("#conversation"))
            seen["cards_after"] = _cards(main)
            seen["rows_after"] = app.query_one(LedgerPanel).row_count
            seen["status"] = plain(main.query_one("#status").content)
            await pilot.press("n")
            await wait_for(pilot, lambda: not app.is_running, timeout=30, what="the app to close")

    run(go())
    before = str(seen["before"])
    # The stopped session's turns and its cards as they were shown live, best marked as it was.
    for text in ("Reading the reference", "Building the extension.", "Checking correctness against the reference."):
        assert text in before, before
    assert f"resumed session {sid} " in before and "5 turns, 1 candidate in the ledger" in before
    assert "stopped: max_turns" in before
    assert seen["cards_before"] == live["cards"] and seen["rows_before"] == 1
    after = str(seen["after"])
    # The run went on below what was restored: the same kernel, so the same candidate.
    assert after.index("Checking correctness") < after.index(f"resumed session {sid} ")
    assert after.index(f"resumed session {sid} ") < after.index("Timing it against eager")
    cards = seen["cards_after"]
    assert cards[:2] == live["cards"] and "Profile · candidate 1 · best so far" in cards[2][0]  # type: ignore[index]
    assert all("· candidate 1" in c[0] and "candidate 2" not in c[0] for c in cards)  # type: ignore[union-attr]
    assert seen["rows_after"] == 1 and "x eager" in str(seen["status"])

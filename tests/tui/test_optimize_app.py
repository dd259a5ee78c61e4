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
from cuda_agent_cli.run.session import ApplyIntent, OptimizeRequest  # noqa: E402
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
            seen["cards"] = [c.result.get("compiled") for c in app.screen_stack[0].query(HarnessCard)]
            seen["ledger_rows"] = app.query_one(LedgerPanel).row_count
            seen["conversation"] = texts(app)
            seen["table"] = plain(review.query_one("#review-table").content)
            seen["facts"] = plain(review.query_one("#review-facts").content)
            seen["diff"] = plain(review.query_one("#review-diff").content, width=400)
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
    assert seen["cards"] == [True, True, True] and seen["ledger_rows"] == 3
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

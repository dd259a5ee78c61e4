"""SVG snapshots of the chat's screens (pytest-textual-snapshot): the main screen with the ledger,
the approval modal, the review screen and the help; and `optimize`'s screen while a session
runs. Update them with `--snapshot-update` after a deliberate change, and look at the new SVGs
before committing them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from chat_helpers import make_repo, replay_file, runtime, wait_for  # noqa: E402

from cuda_agent_cli.agent import events as ev  # noqa: E402
from cuda_agent_cli.chat.optimize_task import TaskRuntime  # noqa: E402
from cuda_agent_cli.harness_result import HarnessResult  # noqa: E402
from cuda_agent_cli.run.optimize import OptimizeRequest  # noqa: E402
from cuda_agent_cli.tui.app import ChatApp  # noqa: E402
from cuda_agent_cli.tui.screens import ApprovalScreen, ReviewScreen  # noqa: E402
from cuda_agent_cli.tui.task import OptimizeApp  # noqa: E402
from cuda_agent_cli.writeback.apply import WriteBackPlan  # noqa: E402
from cuda_agent_cli.writeback.diff import FileChange, unified_patch  # noqa: E402

SIZE = (120, 36)
SID = "20260101-120000-abcdef"


def harness_result(reward, eager, comp, correct=True, checks=()):
    t = None
    if eager:
        t = {
            "eager_us": 812.4,
            "compile_us": 640.2,
            "candidate_us": round(812.4 / eager, 1),
            "speedup_vs_eager": eager,
            "speedup_vs_compile": comp,
            "speedup_vs_eager_interval": [round(eager * 0.97, 2), round(eager * 1.03, 2)],
            "speedup_vs_compile_interval": [round(comp * 0.97, 2), round(comp * 1.03, 2)],
            "uncertain": False,
            "method": "cpu perf_counter, interleaved blocks",
            "trials": 30,
        }
    return {
        "compiled": True,
        "correct": correct,
        "reward": reward,
        "device": "cpu",
        "policy": "strict",
        "errors": [],
        "warnings": [],
        "timings": t,
        "checks": [{"name": n, "passed": False, "detail": "max abs diff 0.31 > atol 0.01"} for n in checks],
        "environment": {"gpu": None, "torch": "2.13.0", "cuda": None},
    }


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # Relative paths keep what the screen shows the same on every machine.
    monkeypatch.chdir(tmp_path)
    make_repo(tmp_path / "repo", {"blocks.py": "import torch\n\n\nclass Block(torch.nn.Module):\n    pass\n"})
    return tmp_path


def steady_cursor(app: ChatApp) -> None:
    """The prompt's cursor blinks; a snapshot must not depend on when in a blink it is taken."""
    app.query_one("#prompt").cursor_blink = False


def recorded_chat(root: Path) -> None:
    """A stored chat session with a fixed transcript and ledger (times and ids fixed)."""
    sdir = root / "data" / "sessions" / SID
    sdir.mkdir(parents=True)
    ev = [
        {
            "event": "session_started",
            "session_id": SID,
            "target": "chat repo",
            "model": "replay:r.jsonl",
            "workspace": str(root / "repo"),
            "settings": {"command": "chat", "repo": str(root / "repo"), "model": "replay:r.jsonl", "mode": "ask"},
            "system_prompt": "You are cuda-agent.",
            "created": 1767268800.0,
        },
        {"event": "user_message", "content": "Where does Block spend its time?"},
        {
            "event": "assistant_message",
            "turn": 1,
            "content": "Reading the module first.",
            "tool_calls": [{"id": "c1", "name": "Read", "arguments": {"file_path": "blocks.py"}, "error": None}],
            "prompt_tokens": 2400,
            "completion_tokens": 40,
            "cost_usd": 0.0,
        },
        {
            "event": "tool_finished",
            "call_id": "c1",
            "name": "Read",
            "output": "     1\timport torch\n",
            "is_error": False,
            "data": None,
            "duration_s": 0.004,
        },
        {
            "event": "assistant_message",
            "turn": 2,
            "content": "`Block.forward` is a **LayerNorm** followed by a mean over tokens:\n\n"
            "- both read `x` twice\n- a fused kernel reads it once\n\n"
            "Run `/optimize blocks.py::Block` to write and measure one.",
            "tool_calls": [],
            "prompt_tokens": 95000,
            "completion_tokens": 60,
            "cost_usd": 0.0,
        },
        {
            "event": "cost",
            "turn_cost_usd": 0.0,
            "total_cost_usd": 0.0,
            "prompt_tokens": 95000,
            "completion_tokens": 60,
            "context_tokens": 95060,
            "context_budget": 131072,
        },
        {"event": "stopped", "reason": "done", "detail": "", "turns": 2, "cost_usd": 0.0},
    ]
    (sdir / "transcript.jsonl").write_text("".join(json.dumps(e) + "\n" for e in ev))
    ledger = [
        {"session_id": "o1", "tool": "Compile", "turn": 4, "result": harness_result(None, None, None)},
        {
            "session_id": "o1",
            "tool": "Verify",
            "turn": 5,
            "result": harness_result(-1, None, None, False, ["outputs_match"]),
        },
        {"session_id": "o1", "tool": "Profile", "turn": 7, "result": harness_result(3, 2.41, 1.62)},
        {"session_id": "o1", "tool": "Profile", "turn": 9, "result": harness_result(2, 1.30, 0.97)},
    ]
    (sdir / "chat.json").write_text(json.dumps({"optimize_sessions": ["o1"], "ledger": ledger}))


def test_main_screen_with_ledger(here: Path, snap_compare):
    recorded_chat(here)
    replay_file(here / "r.jsonl", [])
    app = ChatApp(runtime(None, "replay:r.jsonl", Path("data"), resume=SID, device="cpu"))

    async def before(pilot):
        steady_cursor(app)
        await pilot.press("ctrl+l")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_approval_modal(here: Path, snap_compare):
    replay_file(
        here / "r.jsonl",
        [
            {
                "content": "Adding a docstring.",
                "tool_calls": [
                    {
                        "name": "Edit",
                        "arguments": {
                            "file_path": "blocks.py",
                            "old_string": "    pass\n",
                            "new_string": '    """LayerNorm, then a mean over tokens."""\n\n    def forward(self, x):\n        return x\n',
                        },
                    }
                ],
            },
        ],
    )
    app = ChatApp(runtime(Path("repo"), "replay:r.jsonl", Path("data"), session_id=SID, device="cpu"))

    async def before(pilot):
        steady_cursor(app)
        app.query_one("#prompt").load_text("document Block")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen) and app.screen.armed, what="approval")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def review_outcome(result: dict) -> SimpleNamespace:
    """What /optimize hands the review screen: a plan of three files and the best result."""
    old = "import torch\n\n\nclass Block(torch.nn.Module):\n    pass\n"
    changes = [
        FileChange("blocks.py", old + "\nfrom ._cuda_agent.block.loader import use_kernel\nuse_kernel(Block)\n", old),
        FileChange("_cuda_agent/block/kernels/block.cpp", "#include <torch/extension.h>\n// fused pass\n"),
        FileChange(".cuda-agent/kernels.toml", '[[kernel]]\ntarget = "blocks.py::Block"\n'),
    ]
    plan = WriteBackPlan(
        repo_root=Path("repo"),
        in_git=True,
        module_rel="blocks.py",
        module_sha256="0" * 64,
        changes=changes,
        patch=unified_patch(changes),
        branch="cuda-agent/block-abcdef",
        commit_message="cuda-agent: Block",
        folder="_cuda_agent/block",
    )
    return SimpleNamespace(
        target="blocks.py::Block",
        session_id="20260101-120500-123456",
        device="cpu",
        result=HarnessResult.from_json(result),
        plan=plan,
        status="improved",
    )


def test_review_screen(here: Path, snap_compare):
    replay_file(here / "r.jsonl", [])
    app = ChatApp(runtime(Path("repo"), "replay:r.jsonl", Path("data"), session_id=SID, device="cpu"))
    outcome = review_outcome(harness_result(3, 2.41, 1.62))

    async def before(pilot):
        steady_cursor(app)
        await app.push_screen(ReviewScreen(outcome))
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_review_screen_says_what_the_reward_means(here: Path):
    """The one-line meaning `optimize`'s linear output prints after the reward, on the review
    screen too (and "uncertain" where an interval straddles the threshold)."""
    from chat_helpers import plain, run

    replay_file(here / "r.jsonl", [])
    app = ChatApp(runtime(Path("repo"), "replay:r.jsonl", Path("data"), session_id=SID, device="cpu"))
    straddling = harness_result(2, 1.30, 1.04)
    straddling["timings"]["speedup_vs_compile_interval"] = [0.99, 1.09]
    straddling["timings"]["uncertain"] = True
    seen = []

    async def go():
        async with app.run_test(size=SIZE) as pilot:
            for result in (harness_result(3, 2.41, 1.62), straddling):
                await app.push_screen(ReviewScreen(review_outcome(result)))
                await pilot.pause()
                seen.append(plain(app.screen.query_one("#review-facts").content))
                app.pop_screen()
                await pilot.pause()

    run(go())
    assert "reward: 3: faster than both eager and torch.compile by more than 5%\n" in seen[0]
    assert "reward: 2: faster than eager by more than 5%, not than torch.compile (uncertain)" in seen[1]


def test_help(here: Path, snap_compare):
    replay_file(here / "r.jsonl", [])
    app = ChatApp(runtime(Path("repo"), "replay:r.jsonl", Path("data"), session_id=SID, device="cpu"))

    async def before(pilot):
        steady_cursor(app)
        app.query_one("#prompt").load_text("/help")
        await pilot.press("enter")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 40), run_before=before)


class RecordedTask(TaskRuntime):
    """One optimize session with the session runner's place taken by a recorded session: its
    events go to the app from the worker thread, as `run_optimize` sends them; then the session
    waits, as between turns, until the app closes."""

    def __init__(self, req: OptimizeRequest, events: list) -> None:
        super().__init__(req, req.model or "", req.device)
        self.events = events

    def run(self, sink, cancel):
        for e in self.events:
            sink(e)
        cancel.wait(60)
        return None


def recorded_optimize_events() -> list:
    def turn(n, text, call, name, arguments, output, seconds):
        return [
            ev.AssistantMessage(n, text, [{"id": call, "name": name, "arguments": arguments, "error": None}], 3000, 80),
            ev.ToolStarted(call, name, arguments),
            ev.ToolFinished(call, name, output, False, None, seconds),
        ]

    sid = "20260101-120500-123456"
    return [
        ev.SessionStarted(sid, "vit_head.py::PooledLayerNorm", "replay:demo.jsonl", "workspace", {}, "", 1767269100.0),
        *turn(
            1,
            "Reading the reference to see exactly what has to be computed.",
            "c1",
            "Read",
            {"file_path": "model.py"},
            "     1\timport torch\n",
            0.004,
        ),
        *turn(
            2,
            "LayerNorm over the last dim, then a mean over tokens: **one pass** can do both.",
            "c2",
            "Write",
            {"file_path": "kernels/pooled_layer_norm.cpp"},
            "wrote 61 lines",
            0.002,
        ),
        *turn(3, "Building the extension.", "c3", "Compile", {}, "compiled", 41.2),
        ev.HarnessResultEvent(
            "c3", "Compile", 3, HarnessResult.from_json(harness_result(None, None, None, correct=False)), False
        ),
        *turn(4, "Checking correctness against the reference.", "c4", "Verify", {}, "correct", 6.8),
        ev.HarnessResultEvent("c4", "Verify", 4, HarnessResult.from_json(harness_result(None, None, None)), True),
        *turn(5, "Correct. Timing it against eager and torch.compile.", "c5", "Profile", {}, "2.41x", 12.5),
        ev.HarnessResultEvent("c5", "Profile", 5, HarnessResult.from_json(harness_result(3, 2.41, 1.62)), True),
        ev.CostUpdate(0.0, 0.0, 3000, 80, 15400, 131072),
    ]


def test_optimize_app_while_the_session_runs(here: Path, snap_compare):
    req = OptimizeRequest(
        target="vit_head.py::PooledLayerNorm", cwd=Path("repo"), model="replay:demo.jsonl", device="cpu"
    )
    app = OptimizeApp(req, RecordedTask(req, recorded_optimize_events()), ask=True, detect=lambda: "cpu")

    async def before(pilot):
        await wait_for(pilot, lambda: len(app.backend.ledger.candidates) == 3, what="the recorded session")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=before)

"""What the terminal shows: progress lines from loop events, the speedup table, the prompt."""

import io

from rich.console import Console

from cuda_agent_cli import ui
from cuda_agent_cli.agent.events import AssistantMessage, HarnessResultEvent, Stopped, ToolFinished, ToolStarted

PROFILED = {"compiled": True, "correct": True, "reward": 3,
            "timings": {"eager_us": 100.0, "compile_us": 80.0, "candidate_us": 40.0, "speedup_vs_eager": 2.5,
                        "speedup_vs_compile": 2.0, "method": "events", "trials": 100},
            "environment": {"gpu": "NVIDIA H200", "torch": "2.11", "cuda": "13.0"}}


def test_progress_lines_follow_the_session():
    state = ui.ProgressState()
    assert state.apply(AssistantMessage(3, "Writing the kernel.\nDetails...", [], cost_usd=0.25)) == "[3] Writing the kernel."
    assert state.apply(ToolStarted("c1", "Write", {"file_path": "kernels/a.cu", "content": "..."})) is None
    assert "running Write" in state.status() and "turn 3" in state.status() and "$0.250" in state.status()
    assert state.apply(ToolFinished("c1", "Write", "ok", False)) == "    ✓ Write kernels/a.cu"
    state.apply(ToolStarted("c2", "Profile", {}))
    assert state.apply(ToolFinished("c2", "Profile", "...", False)) is None  # said by the harness line
    line = state.apply(HarnessResultEvent("c2", "Profile", 4, PROFILED, True, "/snap"))
    assert line == "    ★ Profile: 40.0 µs — 2.50x vs eager, 2.00x vs torch.compile (reward 3)"
    assert "best 2.00x vs torch.compile" in state.status()
    assert state.apply(Stopped("max_turns", "limit of 4 turns")) == "stopped: max_turns — limit of 4 turns"


def test_a_limit_stop_line_names_the_limit_and_where_it_came_from():
    state = ui.ProgressState()
    assert state.apply(Stopped("max_turns", "max_turns 3 from pyproject.toml")) == \
        "stopped: max_turns 3 from pyproject.toml"
    assert ui.stop_line("timeout", "timeout 60 s from CUDA_AGENT_TIMEOUT") == "stopped: timeout 60 s from CUDA_AGENT_TIMEOUT"
    assert ui.stop_line("error", "server gone") == "stopped: error — server gone"
    assert ui.stop_line("done") == "stopped: done"


def test_failed_steps_say_why_in_one_line():
    assert ui.harness_line("Compile", {"compiled": False, "errors": ["a.cu:3: error: expected ';'\nnote"]}) == \
        "Compile: compile failed — a.cu:3: error: expected ';'"
    assert ui.harness_line("Verify", {"compiled": True, "correct": False, "checks": [
        {"name": "outputs", "passed": False, "detail": "max abs diff 3.2"}]}) == "Verify: not correct — max abs diff 3.2"


def test_review_table_has_eager_compile_kernel_method_and_gpu():
    out = io.StringIO()

    class Outcome:
        best, device, plan = PROFILED, "cuda", None

    ui.render_review(Console(file=out, width=100), Outcome())
    text = out.getvalue()
    for words in ("Measured on NVIDIA H200", "eager PyTorch", "100.0 µs", "2.50x", "torch.compile", "2.00x",
                  "kernel", "40.0 µs", "method: events; reward 3"):
        assert words in text


def test_confirm_needs_an_explicit_yes():
    for answer, expected in (("y\n", True), ("yes\n", True), ("\n", False), ("n\n", False), ("", False)):
        console = Console(file=io.StringIO(), force_terminal=False)
        import sys

        old = sys.stdin
        sys.stdin = io.StringIO(answer)
        try:
            assert ui.confirm(console, "Apply [this]?") is expected
        finally:
            sys.stdin = old

"""What the terminal shows: progress lines from loop events, the speedup table, the prompt."""

import io

from rich.console import Console

from cuda_agent_cli.agent.events import AssistantMessage, HarnessResultEvent, Stopped, ToolFinished, ToolStarted
from cuda_agent_cli.cli import render as ui
from cuda_agent_cli.harness_result import HarnessResult

PROFILED = {
    "compiled": True,
    "correct": True,
    "reward": 3,
    "timings": {
        "eager_us": 100.0,
        "compile_us": 80.0,
        "candidate_us": 40.0,
        "speedup_vs_eager": 2.5,
        "speedup_vs_compile": 2.0,
        "method": "events",
        "trials": 100,
    },
    "environment": {"gpu": "NVIDIA H200", "torch": "2.11", "cuda": "13.0"},
}


def test_progress_lines_follow_the_session():
    state = ui.ProgressState()
    assert (
        state.apply(AssistantMessage(3, "Writing the kernel.\nDetails...", [], cost_usd=0.25))
        == "[3] Writing the kernel."
    )
    assert state.apply(ToolStarted("c1", "Write", {"file_path": "kernels/a.cu", "content": "..."})) is None
    assert "running Write" in state.status() and "turn 3" in state.status() and "$0.250" in state.status()
    assert state.apply(ToolFinished("c1", "Write", "ok", False)) == "    ✓ Write kernels/a.cu"
    state.apply(ToolStarted("c2", "Profile", {}))
    assert state.apply(ToolFinished("c2", "Profile", "...", False)) is None  # said by the harness line
    line = state.apply(HarnessResultEvent("c2", "Profile", 4, HarnessResult.from_json(PROFILED), True, "/snap"))
    assert line == "    ★ Profile: 40.0 µs — 2.50x vs eager, 2.00x vs torch.compile (reward 3)"
    assert "best 2.00x vs torch.compile" in state.status()
    assert state.apply(Stopped("max_turns", "limit of 4 turns")) == "stopped: max_turns — limit of 4 turns"


def test_a_limit_stop_line_names_the_limit_and_where_it_came_from():
    state = ui.ProgressState()
    assert (
        state.apply(Stopped("max_turns", "max_turns 3 from pyproject.toml"))
        == "stopped: max_turns 3 from pyproject.toml"
    )
    assert (
        ui.stop_line("timeout", "timeout 60 s from CUDA_AGENT_TIMEOUT")
        == "stopped: timeout 60 s from CUDA_AGENT_TIMEOUT"
    )
    assert ui.stop_line("error", "server gone") == "stopped: error — server gone"
    assert ui.stop_line("done") == "stopped: done"


def test_failed_steps_say_why_in_one_line():
    compile_failed = {"compiled": False, "errors": ["a.cu:3: error: expected ';'\nnote"]}
    assert (
        ui.harness_line("Compile", HarnessResult.from_json(compile_failed))
        == "Compile: compile failed — a.cu:3: error: expected ';'"
    )
    wrong = {
        "compiled": True,
        "correct": False,
        "checks": [{"name": "outputs", "passed": False, "detail": "max abs diff 3.2"}],
    }
    assert ui.harness_line("Verify", HarnessResult.from_json(wrong)) == "Verify: not correct — max abs diff 3.2"


def test_review_table_has_eager_compile_kernel_method_and_gpu():
    out = io.StringIO()

    class Outcome:
        result, device, plan = HarnessResult.from_json(PROFILED), "cuda", None

    ui.render_review(Console(file=out, width=100), Outcome())
    text = out.getvalue()
    for words in (
        "Measured on NVIDIA H200",
        "eager PyTorch",
        "100.0 µs",
        "2.50x",
        "torch.compile",
        "2.00x",
        "kernel",
        "40.0 µs",
        "method: events; 100 trials",
        "reward 3: faster than both eager and torch.compile by more than 5%",
    ):
        assert words in text


LONG = "+    y = " + " + ".join(f"weight_{i} * x_{i}" for i in range(30)) + "  # the end of a long line\n"
PATCH = (
    "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1,1 +1,2 @@\n x = 1\n"
    + LONG
    + "diff --git a/k.cpp b/k.cpp\nnew file mode 100644\n--- /dev/null\n+++ b/k.cpp\n@@ -0,0 +1 @@\n+int k;\n"
)


class Plan:
    from cuda_agent_cli.writeback.diff import FileChange

    changes = [FileChange("m.py", "x = 1\n" + LONG[1:], "x = 1\n"), FileChange("k.cpp", "int k;\n")]
    patch = PATCH
    repo_root = "/repo"
    module_rel = "m.py"


def _outcome(best=PROFILED):
    class Outcome:
        device, plan, target, reward = "cuda", Plan(), "m.py::Block", best.get("reward")

    Outcome.result = HarnessResult.from_json(best)
    return Outcome()


def test_piped_review_shows_the_table_first_and_every_diff_line_whole():
    out = io.StringIO()
    ui.render_review(Console(file=out, width=80), _outcome())
    text = out.getvalue()
    assert len(LONG) > 200 and LONG in text  # not cut at the 80 columns of a pipe
    assert PATCH in text  # byte for byte
    assert text.index("eager PyTorch") < text.index("reward 3:") < text.index("2 files, +2 -0 lines in /repo")
    assert text.index("2 files") < text.index("diff --git")


def test_on_a_terminal_the_diff_goes_through_the_pager(tmp_path, monkeypatch):
    import re

    paged = tmp_path / "paged.txt"
    monkeypatch.setenv("PAGER", f"cat > {paged}")
    out = io.StringIO()
    ui.render_review(Console(file=out, width=80, force_terminal=True, color_system="standard"), _outcome(), paged=True)
    shown = paged.read_text()
    assert "\x1b[" in shown  # coloured
    assert re.sub(r"\x1b\[[0-9;]*m", "", shown) == PATCH  # whole lines, nothing added or cut
    text = out.getvalue()
    assert "eager PyTorch" in text and "diff --git" not in text  # the table stays in sight


def test_without_a_working_pager_the_diff_is_printed(monkeypatch):
    monkeypatch.setenv("PAGER", "no-such-pager-for-cuda-agent")
    out = io.StringIO()
    ui.render_review(Console(file=out, width=80, force_terminal=True, color_system=None), _outcome(), paged=True)
    assert LONG.strip() in out.getvalue()


def test_pager_defaults_to_less_and_can_be_turned_off():
    from cuda_agent_cli.cli.pager import pager_command

    assert pager_command({}) == "less -R"
    assert pager_command({"PAGER": "most"}) == "most"
    assert pager_command({"PAGER": ""}) is None and pager_command({"PAGER": "cat"}) is None


def test_the_reward_is_explained_in_words():
    def best(reward, uncertain=False):
        return HarnessResult.from_json(
            {**PROFILED, "reward": reward, "timings": {**PROFILED["timings"], "uncertain": uncertain}}
        )

    assert ui.reward_line(best(3)) == "reward 3: faster than both eager and torch.compile by more than 5%"
    assert ui.reward_line(best(2)) == "reward 2: faster than eager by more than 5%, not than torch.compile"
    assert ui.reward_line(best(1)) == "reward 1: correct, but not more than 5% faster than eager"
    assert ui.reward_line(best(2, uncertain=True)).startswith(
        "reward 2: faster than eager by more than 5%, not than torch.compile (uncertain:"
    )


def test_harness_warnings_are_shown_under_the_table():
    warned = {**PROFILED, "warnings": ["speedup of 250x vs eager is implausible: review the kernel"]}
    out = io.StringIO()
    ui.render_review(Console(file=out, width=80), _outcome(warned))
    text = out.getvalue()
    assert "warning: speedup of 250x vs eager is implausible: review the kernel" in text
    assert text.index("eager PyTorch") < text.index("warning:") < text.index("diff --git")


def test_the_summary_line_repeats_the_result():
    assert (
        ui.summary_line(_outcome())
        == "m.py::Block · 2.50x vs eager, 2.00x vs torch.compile (reward 3) · 2 files, +2 -0 lines"
    )


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

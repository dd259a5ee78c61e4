"""The chat's pure parts: slash commands, @mentions, the ledger, the approval gate, export, undo."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cuda_agent_cli.actions import ActionContext, make_toolbox
from cuda_agent_cli.agent.events import AssistantMessage, HarnessResultEvent, ToolFinished, UserMessage
from cuda_agent_cli.chat import commands, mentions
from cuda_agent_cli.chat.approval import ChatPermissions, Decision, restore
from cuda_agent_cli.chat.commands import parse_optimize_args
from cuda_agent_cli.chat.export import transcript_markdown
from cuda_agent_cli.chat.ledger import Ledger, fmt_speedup
from cuda_agent_cli.errors import BadInput
from cuda_agent_cli.harness_result import HarnessResult
from cuda_agent_cli.sandbox import SandboxPolicy, open_sandbox


def result(correct=True, reward=3, eager=2.0, comp=1.5, checks=()):
    timings = None
    if reward is not None and reward > 0:
        timings = {
            "eager_us": 20.0,
            "compile_us": 15.0,
            "candidate_us": 10.0,
            "speedup_vs_eager": eager,
            "speedup_vs_compile": comp,
            "speedup_vs_eager_interval": [eager - 0.1, eager + 0.1],
            "speedup_vs_compile_interval": [comp - 0.1, comp + 0.1],
            "method": "cpu timer",
            "trials": 30,
        }
    return HarnessResult.from_json(
        {
            "compiled": True,
            "correct": correct,
            "reward": reward,
            "timings": timings,
            "warnings": [],
            "errors": [],
            "checks": [{"name": n, "passed": False, "detail": "bad"} for n in checks],
        }
    )


# -- slash commands ------------------------------------------------------------------------------


def test_unknown_command_names_the_closest_one():
    with pytest.raises(commands.UnknownCommand) as exc:
        commands.parse("/optimise x.py::A")
    assert "did you mean /optimize?" in str(exc.value)
    with pytest.raises(commands.UnknownCommand) as exc:
        commands.parse("/zzzz")
    assert "/help lists" in str(exc.value)


def test_every_command_has_a_description_and_declares_busy_rule():
    assert commands.COMMANDS and len(commands.BY_NAME) == len(commands.COMMANDS)  # no name twice
    assert all(c.description for c in commands.COMMANDS)
    assert not commands.BY_NAME["optimize"].while_busy and commands.BY_NAME["help"].while_busy


def test_parse_keeps_quoted_arguments_and_completion_filters_by_prefix():
    p = commands.parse('/optimize m.py::Block --inputs "x=float32[8,4]; init: 4"')
    assert p.command.name == "optimize" and p.args == ["m.py::Block", "--inputs", "x=float32[8,4]; init: 4"]
    assert [c.name for c in commands.completions("/re")] == ["resume"]
    assert len(commands.completions("/")) == len(commands.COMMANDS)


def test_optimize_arguments():
    assert parse_optimize_args(["a.py::A", "--inputs", "x=float32[2]", "--device=cpu"]) == {
        "target": "a.py::A",
        "inputs": "x=float32[2]",
        "capture": None,
        "device": "cpu",
        "policy": None,
    }
    with pytest.raises(BadInput, match="needs a target"):
        parse_optimize_args([])
    with pytest.raises(BadInput, match="does not know --fast"):
        parse_optimize_args(["a.py::A", "--fast"])
    with pytest.raises(BadInput, match="needs a value"):
        parse_optimize_args(["a.py::A", "--inputs"])


def test_optimize_takes_capture_as_the_command_line_does_and_not_with_inputs():
    line = commands.parse('/optimize mixers/blend.py::Blend --capture "python train.py --steps 2"')
    fields = parse_optimize_args(line.args)
    assert fields["target"] == "mixers/blend.py::Blend" and fields["inputs"] is None
    assert fields["capture"] == "python train.py --steps 2"
    assert parse_optimize_args(["a.py::A", "--capture=python run.py"])["capture"] == "python run.py"
    with pytest.raises(BadInput) as refused:
        parse_optimize_args(["a.py::A", "--inputs", "x=float32[2]", "--capture", "python run.py"])
    assert refused.value.one_line() == (
        "--inputs and --capture both say which calls to optimize for — give one of them, not both"
    )
    with pytest.raises(BadInput) as unknown:
        parse_optimize_args(["a.py::A", "--target", "b.py::B"])
    assert (
        unknown.value.one_line() == "/optimize does not know --target — use --inputs, --capture, --device or --policy"
    )
    assert '--capture "CMD"' in commands.BY_NAME["optimize"].usage


# -- mentions ------------------------------------------------------------------------------------


def test_mentions_expand_files_and_line_ranges(tmp_path: Path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text("".join(f"line {i}\n" for i in range(1, 51)))
    text, problems = mentions.expand("look at @pkg/m.py#10-12 and @missing.py", tmp_path)
    assert "Contents of pkg/m.py (lines 10-12):" in text
    assert "line 10\nline 11\nline 12\n```" in text and "line 13" not in text
    assert problems == ["@missing.py is not a file in the repository"]
    _, problems = mentions.expand("@../etc/passwd", tmp_path)
    assert problems == ["@../etc/passwd is outside the repository"]
    assert mentions.expand("mail me at a@b.com", tmp_path) == ("mail me at a@b.com", [])


def test_mention_completion_from_repository_files(tmp_path: Path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "blocks.py").write_text("")
    (tmp_path / "setup.py").write_text("")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("")
    files = mentions.repo_files(tmp_path)
    assert files == ["setup.py", "src/blocks.py"]
    assert mentions.complete("blo", files) == ["src/blocks.py"]
    assert mentions.complete("s", files) == ["setup.py", "src/blocks.py"]
    assert mentions.trailing_mention("see @src/bl") == "src/bl"
    assert mentions.trailing_mention("mail a@b") is None


# -- ledger --------------------------------------------------------------------------------------


def test_ledger_marks_the_best_measured_candidate_not_the_last():
    led = Ledger()
    led.add("s", "Verify", 1, result(reward=None))
    led.add("s", "Profile", 2, result(reward=3, eager=2.0, comp=1.5))
    led.add("s", "Profile", 3, result(reward=2, eager=3.0, comp=0.9))
    led.add("s", "Verify", 4, result(correct=False, reward=-1, checks=["outputs_match"]))
    assert led.best().index == 2 and led.best().candidate == 2  # recorded without sources: one each
    rows = led.rows()
    assert rows[1][0] == "★2" and rows[2][0] == "3"
    assert rows[3][3] == "no" and rows[3][7] == "outputs_match"
    assert rows[1][5] == "2.00x [1.90-2.10]"
    assert led.best_verified_speedup() == "2.00x eager, 1.50x compile"
    assert fmt_speedup(None, "eager") == "-"


def test_ledger_counts_kernels_not_harness_calls():
    led = Ledger()
    first = [
        led.add("s", "Compile", 1, result(reward=None), sources="k1"),
        led.add("s", "Verify", 2, result(reward=None), sources="k1"),
        led.add("s", "Profile", 3, result(reward=2, eager=1.3, comp=0.9), sources="k1"),
    ]
    other = led.add("s", "Verify", 4, result(correct=False, reward=-1, checks=["outputs_match"]), sources="k2")
    again = led.add("s", "Profile", 5, result(reward=1, eager=1.02, comp=0.7), sources="k1")  # k1 once more
    elsewhere = led.add("t", "Profile", 1, result(reward=3, eager=2.0, comp=1.2), sources="k1")  # another session
    # Every card of the first kernel says "candidate 1", however many calls judged it.
    assert [j.candidate for j in (*first, other, again, elsewhere)] == [1, 1, 1, 2, 1, 3]
    assert [j.index for j in led.judged] == [1, 2, 3, 4, 5, 6]
    assert len(led.candidates) == 3 and [len(c.judged) for c in led.candidates] == [4, 1, 1]
    rows = led.rows()
    assert [r[0] for r in rows] == ["1", "2", "★3"]
    # A candidate shows its best measured result (the first Profile), not its latest.
    assert rows[0][1:6] == ("Profile", "yes", "yes", "2", "1.30x [1.20-1.40]")
    assert rows[1][3] == "no" and rows[1][7] == "outputs_match"
    assert led.best() is elsewhere and led.was_best(first[2]) and not led.was_best(again)
    # A kernel that never measured shows its latest result.
    lone = Ledger()
    lone.add("s", "Compile", 1, result(reward=None, correct=False), sources="k")
    lone.add("s", "Verify", 2, result(correct=False, reward=-1, checks=["outputs_match"]), sources="k")
    assert lone.rows() == [("1", "Verify", "yes", "no", "-1", "-", "-", "outputs_match")]


# -- approvals -----------------------------------------------------------------------------------


@pytest.fixture
def repo_box(tmp_path: Path):
    (tmp_path / "a.py").write_text("x = 1\n")
    sandbox = open_sandbox(SandboxPolicy.repository(tmp_path), allow_unsafe=True)
    asked = []
    answers = []

    def post(pending):  # what the view does with a question: shows it, and answers its future
        asked.append(pending.request)
        pending.decide(answers.pop(0))

    perms = ChatPermissions(mode="ask")
    box = make_toolbox(ActionContext(sandbox, permissions=perms))
    with perms.asking(post):
        yield box, perms, asked, answers, tmp_path
    box.close()


def test_approval_shows_the_proposed_edit_and_each_choice_works(repo_box):
    box, perms, asked, answers, root = repo_box
    answers.append(Decision("deny"))
    r = box.call("Edit", {"file_path": "a.py", "old_string": "x = 1", "new_string": "x = 2"})
    assert r.is_error and "declined" in r.output and (root / "a.py").read_text() == "x = 1\n"
    req = asked[-1]
    assert (req.path, req.old, req.new) == ("a.py", "x = 1\n", "x = 2\n")

    answers.append(Decision("instruct", "use y instead"))
    r = box.call("Write", {"file_path": "b.py", "content": "z"})
    assert r.is_error and "Their instruction instead: use y instead" in r.output
    assert asked[-1].old is None and asked[-1].new == "z"

    answers.append(Decision("once"))
    assert not box.call("Edit", {"file_path": "a.py", "old_string": "x = 1", "new_string": "x = 2"}).is_error
    assert (root / "a.py").read_text() == "x = 2\n"

    answers.append(Decision("session"))
    assert not box.call("Write", {"file_path": "c.py", "content": "c"}).is_error
    n = len(asked)
    assert not box.call("Write", {"file_path": "d.py", "content": "d"}).is_error
    assert len(asked) == n  # allowed for the session: no more questions for writes
    # Each write let through left a backup; restoring the newest removes the new file.
    assert restore(perms.pop_backup()) == ["removed d.py (it did not exist before)"]
    assert not (root / "d.py").exists()


def test_an_edit_that_cannot_apply_says_why_in_the_approval(repo_box):
    box, perms, asked, answers, root = repo_box
    answers.append(Decision("once"))
    r = box.call("Edit", {"file_path": "a.py", "old_string": "nope", "new_string": "x"})
    assert r.is_error
    assert asked[-1].new is None and "old_string" in (asked[-1].problem or "")


def test_a_question_waits_for_its_future_and_an_interrupt_withdraws_it(tmp_path: Path):
    """The gate posts each question with a future and waits in the agent's thread: the answer
    may come from another thread later; a set cancel withdraws the question (a denial, and the
    future cancelled, which tells the view to take it down). With nobody to post to, a call
    that needs a yes is refused."""
    import threading

    (tmp_path / "a.py").write_text("x = 1\n")
    sandbox = open_sandbox(SandboxPolicy.repository(tmp_path), allow_unsafe=True)
    perms = ChatPermissions(mode="ask")
    box = make_toolbox(ActionContext(sandbox, permissions=perms))
    posted = []

    def answer_later(pending):
        posted.append(pending)
        threading.Timer(0.3, pending.decide, [Decision("once")]).start()

    with perms.asking(answer_later):
        assert not box.call("Write", {"file_path": "b.py", "content": "b"}).is_error
    assert (tmp_path / "b.py").read_text() == "b" and posted[0].answer.result() == Decision("once")

    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    with perms.asking(posted.append, cancel):
        r = box.call("Write", {"file_path": "c.py", "content": "c"})
    assert r.is_error and "declined" in r.output and not (tmp_path / "c.py").exists()
    assert posted[1].answer.cancelled() and not posted[1].decide(Decision("once"))  # too late to answer

    r = box.call("Write", {"file_path": "d.py", "content": "d"})
    assert r.is_error and "nobody can give it here" in r.output
    box.close()


def test_modes_accept_edits_and_yolo(repo_box):
    box, perms, asked, answers, root = repo_box
    perms.mode = "accept-edits"
    assert not box.call("Write", {"file_path": "e.py", "content": "e"}).is_error
    assert asked == []
    perms.mode = "yolo"
    assert not box.call("Write", {"file_path": "f.py", "content": "f"}).is_error
    assert asked == []


# -- export --------------------------------------------------------------------------------------


def test_export_markdown_has_every_part():
    events = [
        UserMessage("make it fast"),
        AssistantMessage(1, "Reading.", [{"id": "c1", "name": "Read", "arguments": {"file_path": "a.py"}}]),
        ToolFinished("c1", "Read", "     1\tx = 1", False),
        HarnessResultEvent("c2", "Profile", 2, result(), True),
    ]
    md = transcript_markdown(events, "chat 1")
    assert md.startswith("# chat 1")
    assert "## You\n\nmake it fast" in md and "## cuda-agent (turn 1)" in md
    assert 'tool `Read` {"file_path": "a.py"}' in md and "x = 1" in md
    assert "**Profile**: compiled True, correct True, reward 3, 2.00x vs eager, 1.50x vs torch.compile" in md


# -- undo of a write-back commit -----------------------------------------------------------------


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def test_revert_commit_undoes_exactly_that_commit(tmp_path: Path):
    from cuda_agent_cli.errors import WriteBackRefused
    from cuda_agent_cli.writeback.git import revert_commit

    _git(tmp_path, "init", "-q")
    (tmp_path / "m.py").write_text("a\n")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "base")
    (tmp_path / "k.cpp").write_text("k\n")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-qm", "kernel")
    sha = _git(tmp_path, "rev-parse", "HEAD").strip()
    (tmp_path / "k.cpp").write_text("edited\n")
    with pytest.raises(WriteBackRefused, match="uncommitted changes in k.cpp"):
        revert_commit(tmp_path, sha)
    _git(tmp_path, "checkout", "k.cpp")
    new = revert_commit(tmp_path, sha)
    assert new != sha and not (tmp_path / "k.cpp").exists() and (tmp_path / "m.py").read_text() == "a\n"
    assert "Revert" in _git(tmp_path, "log", "-1", "--format=%s")


def test_streamed_replies_split_between_paragraphs_never_inside_code():
    from cuda_agent_cli.tui.conversation import split_point

    assert split_point("", "one paragraph\n\ntwo") == len("one paragraph\n\n")
    assert split_point("", "no break yet") is None
    # inside a fence opened earlier: the blank line is code, not a paragraph end
    assert split_point("```python\nx = 1\n", "\n\ny = 2\n```\n\nafter") == len("\n\ny = 2\n```\n\n")
    assert split_point("", "```\na\n\nb\n```") is None
    # text that arrived all at once fills the piece first: the first break past the room left
    assert split_point("", "one\n\ntwo\n\nthree", at_least=6) == len("one\n\ntwo\n\n")


def test_the_diff_view_wraps_long_lines_instead_of_cutting_them():
    import io

    from rich.console import Console

    from cuda_agent_cli.tui.render import diff_view

    line = "+" + "".join(f"w{i} " for i in range(120))
    console = Console(width=80, file=io.StringIO(), record=True, color_system=None)
    console.print(diff_view(f"--- a/x\n+++ b/x\n@@ -1 +1 @@\n{line}\n"))
    shown = "".join(console.export_text().split())
    assert "".join(line.split()) in shown

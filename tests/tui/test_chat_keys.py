"""What the keyboard does in the chat when the screen changes under the user's fingers: an
approval that opens while they type, a tool line that took the focus, modals on a small
terminal, and slow commands that must not freeze the prompt."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from chat_helpers import (  # noqa: E402
    chat_app,
    make_repo,
    plain,
    replay_file,
    run,
    runtime,
    texts,
    type_ahead,
    type_and_send,
    wait_for,
)

from cuda_agent_cli.agent.transcript import read_records  # noqa: E402
from cuda_agent_cli.tui.screens import ApprovalScreen  # noqa: E402


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"a.py": "x = 1\n"})


def _two_writes():
    return [
        {"content": None, "tool_calls": [{"name": "Write", "arguments": {"file_path": "b.py", "content": "b\n"}}]},
        {"content": None, "tool_calls": [{"name": "Write", "arguments": {"file_path": "c.py", "content": "c\n"}}]},
        {"content": "Both written.", "tool_calls": []},
    ]


def _typed(text: str) -> list[str]:
    """Pilot's key names for `text` typed as it is."""
    return ["space" if c == " " else c for c in text]


async def _approval(pilot, app, other_than=None):
    """The approval screen once it takes choices (after its grace)."""
    return await wait_for(
        pilot,
        lambda: (
            isinstance(app.screen, ApprovalScreen) and app.screen is not other_than and app.screen.armed and app.screen
        ),
        what="the approval",
    )


def _hint(screen) -> str:
    return plain(screen.query_one("#approval-hint").content)


def test_text_typed_while_a_write_approval_shows_answers_nothing_and_is_kept(repo, tmp_path):
    """What a new user did: a Write approval opened while they typed `/nosuch`, Enter, `hello
    again`, Enter. The `n` and the `a` answer nothing; the command runs as any typed while the
    agent works does, and the message is queued; Esc then denies the write."""
    model = replay_file(
        tmp_path / "r.jsonl",
        [
            {"content": None, "tool_calls": [{"name": "Write", "arguments": {"file_path": "b.py", "content": "b\n"}}]},
            {"content": "Left b.py alone.", "tool_calls": []},
            {"content": "Hello again to you.", "tool_calls": []},
        ],
    )
    rt = runtime(repo, f"replay:{model}", tmp_path / "data", mode="ask")
    app = chat_app(rt)

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await type_and_send(pilot, app, "write b")
            screen = await _approval(pilot, app)
            assert "typing goes to the prompt" in _hint(screen) and "Tab or ←/→ picks, Enter takes it" in _hint(screen)
            await pilot.press(*_typed("/nosuch"), "enter", *_typed("hello again"), "enter")
            await pilot.pause()
            assert app.screen is screen  # still asking: nothing typed answered it
            assert not (repo / "b.py").exists() and not rt.permissions.always_writes
            # Nothing typed is lost: the command ran (as one typed while the agent works), the
            # message waits its turn, and the dialog says where the typing went.
            assert "unknown command /nosuch" in texts(app)
            assert list(app.queue) == ["hello again"] and "› hello again  (queued)" in texts(app)
            assert "typed text went to the prompt" in _hint(screen)
            await pilot.press(*_typed("and"))  # typed, not sent: it waits in the prompt
            assert app.prompt.text == "and" and app.screen is screen
            await pilot.press("backspace", "backspace", "backspace")
            assert app.prompt.text == ""
            from textual import events

            app.post_message(events.Paste("pasted"))  # a paste goes the same way
            await wait_for(pilot, lambda: app.prompt.text == "pasted", what="the paste")
            assert app.screen is screen
            app.prompt.load_text("")
            await pilot.press("escape")  # Esc denies
            await wait_for(pilot, lambda: app.busy is None and "Hello again to you." in texts(app), what="the queue")

    run(go())
    assert not (repo / "b.py").exists()
    outputs = [r["output"] for r in read_records(rt.state.transcript_path) if r["event"] == "tool_finished"]
    assert outputs[0].startswith("The user declined: Write b.py")
    users = [r["content"] for r in read_records(rt.state.transcript_path) if r["event"] == "user_message"]
    assert users == ["write b", "hello again"]


def test_an_interrupted_turn_takes_its_question_down(repo, tmp_path):
    """The gate waits on the question's future; when the turn is interrupted (quitting sets the
    same cancel) it withdraws the question, and the dialog closes unanswered."""
    model = replay_file(tmp_path / "r.jsonl", _two_writes())
    rt = runtime(repo, f"replay:{model}", tmp_path / "data", mode="ask")
    app = chat_app(rt)

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await type_and_send(pilot, app, "write b and c")
            await _approval(pilot, app)
            app.work.cancel.set()
            await wait_for(pilot, lambda: not isinstance(app.screen, ApprovalScreen), what="the question withdrawn")
            await wait_for(pilot, lambda: app.busy is None and "interrupted" in texts(app), what="the turn's end")
            assert not (repo / "b.py").exists()

    run(go())


def test_keys_typed_as_the_approval_opens_answer_nothing(repo, tmp_path, monkeypatch):
    # A long grace in the test, so a slow machine still sends the keys inside it.
    monkeypatch.setattr(ApprovalScreen, "GRACE_S", 6.0)
    model = replay_file(tmp_path / "r.jsonl", _two_writes())
    rt = runtime(repo, f"replay:{model}", tmp_path / "data", mode="ask")
    app = chat_app(rt)

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await type_and_send(pilot, app, "write b and c")
            screen = await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen) and app.screen, what="modal")
            # Still moving around as the question opens: nothing highlights, nothing is taken.
            await pilot.press("tab", "right", "enter", "left", "shift+tab", "enter", "escape")
            await pilot.pause(0.1)
            assert app.screen is screen and not screen.armed and screen.picked() is None
            assert not rt.permissions.always_writes and not (repo / "b.py").exists()
            assert "the choices open in a moment" in _hint(screen)
            await pilot.click("#session")  # nor a click
            await pilot.pause(0.1)
            assert app.screen is screen and not rt.permissions.always_writes and screen.picked() is None
            await wait_for(pilot, lambda: screen.armed, what="the choices to open")
            await pilot.press("tab", "enter")
            await wait_for(pilot, lambda: (repo / "b.py").exists(), what="b.py")
            second = await wait_for(
                pilot, lambda: isinstance(app.screen, ApprovalScreen) and app.screen is not screen and app.screen
            )
            await pilot.press("tab", "enter")  # this one has just opened: nothing
            await pilot.pause(0.1)
            assert app.screen is second and not (repo / "c.py").exists()
            await wait_for(pilot, lambda: second.armed, what="the second question's choices")
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.busy is None and "Both written." in texts(app), what="the turn")
            assert not (repo / "c.py").exists()

    run(go())


def test_allowing_for_the_session_takes_its_own_highlight(repo, tmp_path):
    """Tab or → first highlights "Allow once", ← first "Deny + instruct": the session-wide
    choice is always a step further, says what it grants while highlighted, and a letter typed
    takes the highlight off, so the Enter after it sends the text instead of answering."""
    writes = [
        {"content": None, "tool_calls": [{"name": "Write", "arguments": {"file_path": f"{n}.py", "content": f"{n}\n"}}]}
        for n in "bcde"
    ]
    model = replay_file(
        tmp_path / "r.jsonl",
        [*writes, {"content": "All written.", "tool_calls": []}, {"content": "Yes?", "tool_calls": []}],
    )
    rt = runtime(repo, f"replay:{model}", tmp_path / "data", mode="ask")
    app = chat_app(rt)

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await type_and_send(pilot, app, "write four files")
            first = await _approval(pilot, app)
            assert first.picked() is None
            await pilot.press("tab")
            assert first.picked() == "once" and "Enter: allow this once" in _hint(first)
            await pilot.press("enter")  # arrows (or Tab) and Enter: allowed once
            await wait_for(pilot, lambda: (repo / "b.py").exists(), what="b.py")
            assert not rt.permissions.always_writes
            second = await _approval(pilot, app, first)
            await pilot.press("left")
            assert second.picked() == "instruct"
            await pilot.press("left", "left")
            assert second.picked() == "session"
            assert "Enter: allow every file write in the repository for the rest of this session" in _hint(second)
            await pilot.press("h")  # typing: the highlight goes, the letter goes to the prompt
            assert second.picked() is None and app.prompt.text == "h"
            await pilot.press("enter")  # sends "h" (queued), answers nothing
            await pilot.pause()
            assert app.screen is second and not rt.permissions.always_writes and list(app.queue) == ["h"]
            await pilot.press("right")
            assert second.picked() == "once"
            await pilot.press("right")
            assert second.picked() == "session"
            await pilot.press("enter")
            await wait_for(pilot, lambda: (repo / "e.py").exists(), what="the rest, unasked")
            assert rt.permissions.always_writes and (repo / "c.py").exists() and (repo / "d.py").exists()
            await wait_for(pilot, lambda: app.busy is None and "Yes?" in texts(app), what="the queued message")
            assert "allowed for the rest of this session: every file write" in texts(app)
            await type_and_send(pilot, app, "/mode ask")  # choosing the mode again forgets the grant
            await wait_for(pilot, lambda: "permission mode is now ask" in texts(app), what="/mode")
            assert not rt.permissions.always_writes

    run(go())


def test_approval_grace_is_short():
    assert 0.3 <= ApprovalScreen.GRACE_S <= 1.0


def test_modals_on_a_small_terminal_say_so_and_come_back_on_resize(repo, tmp_path):
    from cuda_agent_cli.tui.screens import HelpScreen

    model = replay_file(tmp_path / "r.jsonl", _two_writes())
    rt = runtime(repo, f"replay:{model}", tmp_path / "data", mode="ask")
    app = chat_app(rt)

    async def go():
        async with app.run_test(size=(40, 10)) as pilot:
            app.submit("write b and c")
            screen = await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen) and app.screen, what="modal")
            await wait_for(pilot, lambda: screen.armed, what="the keys to arm")
            msg = screen.query_one("#screen-too-small")
            assert msg.display and not screen.query_one("#approval").display
            assert "The terminal is 40x10; cuda-agent chat needs at least 60x16" in plain(msg.content)
            await pilot.press("tab", "enter")  # what cannot be seen cannot be approved
            await pilot.pause(0.1)
            assert app.screen is screen and not (repo / "b.py").exists()
            await pilot.resize_terminal(120, 40)
            await wait_for(pilot, lambda: not msg.display and screen.query_one("#approval").display, what="resize")
            await pilot.press("tab", "enter")
            await wait_for(pilot, lambda: (repo / "b.py").exists(), what="b.py")
            second = await wait_for(
                pilot, lambda: isinstance(app.screen, ApprovalScreen) and app.screen is not screen and app.screen
            )
            await wait_for(pilot, lambda: second.armed, what="the second modal's keys")
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.busy is None, what="the turn")
            await pilot.resize_terminal(50, 12)
            app.push_screen(HelpScreen())
            await pilot.pause()
            help_msg = app.screen.query_one("#screen-too-small")
            assert isinstance(app.screen, HelpScreen) and help_msg.display
            assert not app.screen.query_one("#help").display
            await pilot.resize_terminal(120, 40)
            await wait_for(pilot, lambda: not help_msg.display, what="help after resize")

    run(go())


def test_typing_after_expanding_a_tool_call_goes_to_the_prompt(repo, tmp_path):
    from cuda_agent_cli.tui.widgets import ToolCallLine

    model = replay_file(
        tmp_path / "r.jsonl",
        [
            {"content": None, "tool_calls": [{"name": "Read", "arguments": {"file_path": "a.py"}}]},
            {"content": "It sets x.", "tool_calls": []},
            {"content": "Yes, to 1.", "tool_calls": []},
        ],
    )
    rt = runtime(repo, f"replay:{model}", tmp_path / "data")
    app = chat_app(rt)

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await type_and_send(pilot, app, "what does a.py do?")
            await wait_for(pilot, lambda: app.busy is None and "It sets x." in texts(app), what="the turn")
            line = app.query_one(ToolCallLine)
            await pilot.press("shift+tab")  # from the prompt back to the tool line
            assert app.focused is line
            await pilot.press("enter")
            assert line.expanded
            await pilot.press("i", "s", "space", "i", "t", "?")  # the next message, typed at once
            prompt = app.query_one("#prompt")
            assert app.focused is prompt and prompt.text == "is it?"
            assert line.expanded  # the space went to the prompt, not to the line
            await pilot.press("enter")
            await wait_for(pilot, lambda: app.busy is None and "Yes, to 1." in texts(app), what="turn 2")
            assert "› is it?" in texts(app)

    run(go())


def test_model_and_resume_check_in_a_worker_and_the_prompt_keeps_typing(repo, tmp_path, monkeypatch):
    import threading
    import time

    import cuda_agent_cli.run.checks as checks

    real = checks.check_model
    threads: list[str] = []

    def slow_check(*args, **kw):
        threads.append(threading.current_thread().name)
        time.sleep(1.5)  # a model check that asks a slow server
        return real(*args, **kw)

    model = replay_file(tmp_path / "r.jsonl", [])
    other = runtime(repo, f"replay:{model}", tmp_path / "data")
    other.ensure_started()
    other.close()
    rt = runtime(repo, f"replay:{model}", tmp_path / "data")
    monkeypatch.setattr(checks, "check_model", slow_check)
    app = chat_app(rt)

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            prompt = app.query_one("#prompt")
            for command, line, done in (
                (f"/model replay:{model}", "checking model", lambda: "model is now" in texts(app)),
                (f"/resume {other.session_id}", "opening session", lambda: app.backend.session_id == other.session_id),
            ):
                await type_and_send(pilot, app, command)
                t0 = time.monotonic()
                await pilot.press("h", "i")  # the screen takes keys while the check runs
                assert time.monotonic() - t0 < 1.0 and prompt.text == "hi"
                assert line in texts(app) and app.busy
                await wait_for(pilot, done, what=command)
                prompt.load_text("")
                await pilot.pause()
            assert threads and "MainThread" not in threads

    run(go())


def test_keys_typed_ahead_reach_the_help_and_the_prompt_in_order(repo, tmp_path):
    """`/help`, Enter, Esc, `/optimize ...`, Enter typed at once: the help opens, the Esc closes
    it, and the /optimize line reaches the prompt whole and runs; Enter sends what the prompt
    holds while the completion popup shows, and never completes it again."""
    from types import SimpleNamespace

    from cuda_agent_cli.tui.screens import HelpScreen

    model = replay_file(tmp_path / "r.jsonl", [])
    rt = runtime(repo, f"replay:{model}", tmp_path / "data")
    ran: list[list[str]] = []

    def optimize(args, sink, cancel):  # the runner's place: what the line asked for
        ran.append(list(args))
        return SimpleNamespace(plan=None, stop_reason="done")

    rt.optimize = optimize
    app = chat_app(rt)
    helps: list[object] = []
    shown = app.commands.handlers["help"]

    def counted_help(args, raw):
        shown(args, raw)
        helps.append(app.screen)

    app.commands.handlers["help"] = counted_help

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            prompt = app.query_one("#prompt")
            type_ahead(app, "/help", "enter", "escape", "/optimize mixers/blend.py::Blend", "enter")
            await wait_for(pilot, lambda: "no correct kernel in this run" in texts(app), what="/optimize")
            assert ran == [["mixers/blend.py::Blend"]]
            assert len(helps) == 1 and isinstance(helps[0], HelpScreen)
            assert not isinstance(app.screen, HelpScreen) and app.focused is prompt and prompt.text == ""
            # A complete command while its completion shows: Enter sends it as typed.
            type_ahead(app, "/undo", "enter")
            await wait_for(pilot, lambda: "nothing to undo" in texts(app), what="/undo")
            type_ahead(app, "/help", "enter", "escape", "/undo", "enter")
            await wait_for(pilot, lambda: texts(app).count("nothing to undo") == 2, what="the second /undo")
            assert len(helps) == 2 and not isinstance(app.screen, HelpScreen)
            # Tab takes the completion once; the Enter after it sends the command.
            type_ahead(app, "/und", "tab", "enter")
            await wait_for(pilot, lambda: texts(app).count("nothing to undo") == 3, what="the completed /undo")
            await pilot.pause()
            assert "unknown command" not in texts(app) and prompt.text == ""
            assert not app.query_one("#completions").display

    run(go())


def _three_reads():
    calls = [{"name": "Read", "arguments": {"file_path": name}} for name in ("a.py", "b.py", "c.py")]
    return [{"content": None, "tool_calls": [c]} for c in calls] + [{"content": "Read all three.", "tool_calls": []}]


def test_tab_and_arrows_move_between_tool_calls_and_back_to_the_prompt(tmp_path):
    repo = make_repo(tmp_path / "repo", {"a.py": "a = 1\n", "b.py": "b = 2\n", "c.py": "c = 3\n"})
    model = replay_file(tmp_path / "r.jsonl", _three_reads())
    rt = runtime(repo, f"replay:{model}", tmp_path / "data", mode="yolo")
    app = chat_app(rt)

    async def go():
        from cuda_agent_cli.tui.widgets import ToolCallLine

        async with app.run_test(size=(120, 40)) as pilot:
            prompt = app.query_one("#prompt")
            status = app.query_one("#status")
            await type_and_send(pilot, app, "read them")
            await wait_for(pilot, lambda: app.busy is None and "Read all three." in texts(app), what="the turn")
            a, b, c = app.query(ToolCallLine)
            assert "Shift+Tab: tool calls" in plain(status.content)
            await pilot.press("shift+tab")  # from the prompt: the newest call
            assert app.focused is c
            assert "↑/↓ Shift+Tab/Tab move" in plain(status.content)
            await pilot.press("up")
            assert app.focused is b
            await pilot.press("shift+tab")
            assert app.focused is a
            await pilot.press("up")  # nothing above the oldest: it stays
            assert app.focused is a
            await pilot.press("enter")
            assert a.expanded and "a = 1" in plain(a.query_one(".tool-body").content)
            await pilot.press("down", "tab")
            assert app.focused is c
            await pilot.press("down")  # below the newest: the prompt
            assert app.focused is prompt
            await pilot.press("tab")  # no completion shown: Tab goes to the newest call too
            assert app.focused is c
            await pilot.press("tab")
            assert app.focused is prompt and "Shift+Tab: tool calls" in plain(status.content)
            await pilot.press("/", "u", "n")  # with a completion shown Tab takes it
            await pilot.pause()
            await pilot.press("tab")
            assert app.focused is prompt and prompt.text == "/undo "
            prompt.load_text("")
            await type_and_send(pilot, app, "/help")
            await wait_for(pilot, lambda: "Shift+Tab / Tab" in texts(app, app.screen), what="the help")
            assert "on a tool call: the one above / below" in texts(app, app.screen)

    run(go())

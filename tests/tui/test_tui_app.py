"""The chat app driven with textual's Pilot, against the replay model and the fake OpenAI server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from chat_helpers import (  # noqa: E402
    MODELS,
    chat_app,
    make_repo,
    plain,
    replay_file,
    run,
    runtime,
    scripted_model,
    texts,
    type_and_send,
    wait_for,
)

from cuda_agent_cli.agent.transcript import read_records  # noqa: E402
from cuda_agent_cli.errors import BadInput, EnvironmentMissing  # noqa: E402
from cuda_agent_cli.model.fake_server import FakeOpenAIServer, reply_error, reply_text, reply_tool  # noqa: E402
from cuda_agent_cli.tui.screens import ApprovalScreen, HelpScreen  # noqa: E402
from cuda_agent_cli.tui.widgets import LedgerPanel, ToolCallLine  # noqa: E402


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"a.py": "x = 1\n", "pkg/m.py": "def f():\n    return 1\n"})


def records(rt, kind):
    return [r for r in read_records(rt.state.transcript_path) if r["event"] == kind]


def tool_outputs(rt):
    return [r["output"] for r in records(rt, "tool_finished")]


# -- the conversation ----------------------------------------------------------------------------


def test_prompt_tool_calls_collapse_and_expand_with_highlighted_output(repo, tmp_path):
    model = replay_file(
        tmp_path / "r.jsonl",
        [
            {
                "content": "Reading **a.py** first.",
                "tool_calls": [{"name": "Read", "arguments": {"file_path": "a.py"}}],
            },
            {"content": "It sets `x` to 1.", "tool_calls": []},
        ],
    )
    rt = runtime(repo, f"replay:{model}", tmp_path / "data")
    app = chat_app(rt)

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await type_and_send(pilot, app, "what does a.py do?")
            await wait_for(pilot, lambda: app.busy is None and app.query(ToolCallLine), what="the turn")
            await wait_for(pilot, lambda: "It sets `x` to 1." in texts(app), what="the reply")
            line = app.query_one(ToolCallLine)
            header = plain(line.query_one(".tool-header").content)
            assert header.startswith("▸ Read  a.py  ✓")
            body = line.query_one(".tool-body")
            assert not body.display
            line.focus()
            await pilot.press("enter")
            assert body.display and line.expanded
            assert "x = 1" in plain(body.content)
            assert type(body.content).__name__ == "Syntax"  # highlighted with pygments (python)
            await pilot.press("space")
            assert not body.display
            shown = texts(app)
            assert "› what does a.py do?" in shown and "Reading **a.py** first." in shown

    run(go())
    started = records(rt, "session_started")[0]
    assert started["settings"]["command"] == "chat" and started["settings"]["repo"] == str(repo)
    assert "1\tx = 1" in tool_outputs(rt)[0]


def test_a_mention_is_read_once_its_text_sent_and_a_bad_one_said(repo, tmp_path, monkeypatch):
    from cuda_agent_cli.chat import mentions

    read = []
    expand = mentions.expand

    def counted(text, root):
        read.append(text)
        return expand(text, root)

    monkeypatch.setattr(mentions, "expand", counted)
    model = replay_file(tmp_path / "r.jsonl", [{"content": "Seen.", "tool_calls": []}])
    rt = runtime(repo, f"replay:{model}", tmp_path / "data")
    app = chat_app(rt)

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await type_and_send(pilot, app, "look at @pkg/m.py and @nope.py")
            await wait_for(pilot, lambda: app.busy is None and "Seen." in texts(app), what="the reply")
            shown = texts(app)
            assert "@nope.py is not a file in the repository" in shown
            assert "› look at @pkg/m.py and @nope.py" in shown and "Contents of" not in shown

    run(go())
    assert read == ["look at @pkg/m.py and @nope.py"]  # once, for the model and the warning both
    sent = records(rt, "user_message")[0]["content"]
    assert "Contents of pkg/m.py:" in sent and "def f():" in sent


def _edits():
    return [
        {
            "content": "Edit 1.",
            "tool_calls": [
                {"name": "Edit", "arguments": {"file_path": "a.py", "old_string": "x = 1", "new_string": "x = 2"}}
            ],
        },
        {
            "content": "Edit 2.",
            "tool_calls": [
                {"name": "Edit", "arguments": {"file_path": "a.py", "old_string": "x = 1", "new_string": "x = 3"}}
            ],
        },
        {
            "content": "Edit 3.",
            "tool_calls": [{"name": "Write", "arguments": {"file_path": "b.py", "content": "b = 1\n"}}],
        },
        {"content": "Edit 4.", "tool_calls": [{"name": "Write", "arguments": {"file_path": "c.py", "content": "c\n"}}]},
        {"content": "Edit 5.", "tool_calls": [{"name": "Write", "arguments": {"file_path": "d.py", "content": "d\n"}}]},
        {"content": "All done.", "tool_calls": []},
    ]


@pytest.mark.parametrize("kind", MODELS)
def test_approval_each_choice_and_the_diff_views(kind, repo, tmp_path):
    with scripted_model(kind, _edits(), tmp_path / "r.jsonl") as model:
        rt = runtime(repo, data=tmp_path / "data", mode="ask", **model)
        app = chat_app(rt)

        async def modal(pilot, other_than=None):
            # Its choices open once the grace after it opened is over (typing ahead answers nothing).
            return await wait_for(
                pilot,
                lambda: (
                    isinstance(app.screen, ApprovalScreen)
                    and app.screen is not other_than
                    and app.screen.armed
                    and app.screen
                ),
                what="approval",
            )

        async def go():
            async with app.run_test(size=(120, 40)) as pilot:
                await type_and_send(pilot, app, "change things")
                screen = await modal(pilot)
                assert screen.request.summary == "Edit a.py"
                diff = plain(screen.query_one("#approval-diff").content)
                assert "-x = 1" in diff and "+x = 2" in diff
                await pilot.press("ctrl+t")  # side by side
                side = plain(screen.query_one("#approval-diff").content)
                assert "before: a.py" in side and "after: a.py" in side and "x = 2" in side
                await pilot.press("right", "enter")  # allow once
                screen = await modal(pilot, screen)
                assert screen.request.summary == "Edit a.py" and screen.request.problem  # x = 1 is gone now
                await pilot.press("right", "right", "right", "enter")  # deny
                screen = await modal(pilot, screen)
                assert screen.request.path == "b.py" and screen.request.old is None
                await pilot.press("left", "enter")  # deny with an instruction: typed into its own box
                await pilot.pause()
                for ch in "use pathlib":
                    await pilot.press("space" if ch == " " else ch)
                await pilot.press("enter")
                screen = await modal(pilot, screen)
                assert screen.request.path == "c.py"
                await pilot.click("#session")  # allow writes for the session: d.py goes through without asking
                await wait_for(pilot, lambda: app.busy is None, what="the turn")
                assert not isinstance(app.screen, ApprovalScreen)

        run(go())
        assert (repo / "a.py").read_text() == "x = 2\n"
        assert not (repo / "b.py").exists()
        assert (repo / "c.py").read_text() == "c\n" and (repo / "d.py").read_text() == "d\n"
        outs = tool_outputs(rt)
        assert outs[1].startswith("The user declined: Edit a.py")
        assert "Their instruction instead: use pathlib" in outs[2]


@pytest.mark.parametrize("kind", MODELS)
def test_undo_reverts_the_agents_last_write_and_says_what(kind, repo, tmp_path):
    turns = [
        {
            "content": None,
            "tool_calls": [
                {"name": "Edit", "arguments": {"file_path": "a.py", "old_string": "x = 1", "new_string": "x = 5"}}
            ],
        },
        {
            "content": None,
            "tool_calls": [{"name": "Write", "arguments": {"file_path": "new.py", "content": "n\n"}}],
        },
        {"content": "Done.", "tool_calls": []},
    ]
    with scripted_model(kind, turns, tmp_path / "r.jsonl") as model:
        rt = runtime(repo, data=tmp_path / "data", mode="yolo", **model)
        app = chat_app(rt)

        async def go():
            async with app.run_test(size=(120, 40)) as pilot:
                await type_and_send(pilot, app, "go")
                await wait_for(pilot, lambda: app.busy is None and "Done." in texts(app), what="the turn")
                assert (repo / "a.py").read_text() == "x = 5\n" and (repo / "new.py").exists()
                await type_and_send(pilot, app, "/undo")
                await wait_for(pilot, lambda: "removed new.py (it did not exist before)" in texts(app), what="undo 1")
                assert not (repo / "new.py").exists() and (repo / "a.py").read_text() == "x = 5\n"
                await type_and_send(pilot, app, "/undo")
                await wait_for(pilot, lambda: "restored a.py" in texts(app), what="undo 2")
                assert (repo / "a.py").read_text() == "x = 1\n"
                await type_and_send(pilot, app, "/undo")
                await wait_for(pilot, lambda: "nothing to undo" in texts(app), what="undo 3")

        run(go())


# -- through litellm and the fake server ---------------------------------------------------------


@pytest.mark.integration
def test_streamed_markdown_tokens_and_a_model_error_that_does_not_end_the_app(repo, tmp_path):
    reply = "# Plan\n\n- read the module\n- write a **kernel**\n\n```python\nx = 1\n```\n"
    with FakeOpenAIServer(
        [
            reply_tool("Read", {"file_path": "pkg/m.py"}, content="Looking."),
            reply_text(reply),
            reply_error(401, "invalid api key", "invalid_api_key"),
            reply_text("Back again."),
        ]
    ) as srv:
        rt = runtime(repo, "openai/fake-coder", tmp_path / "data", api_base=srv.api_base)
        app = chat_app(rt)

        async def go():
            async with app.run_test(size=(120, 40)) as pilot:
                await type_and_send(pilot, app, "plan it")
                await wait_for(pilot, lambda: app.busy is None and "- write a **kernel**" in texts(app), what="reply")
                from cuda_agent_cli.tui.widgets import SettledMarkdown

                mds = [m for m in app.conversation.query(SettledMarkdown)]
                assert any(m.source.strip() == reply.strip() for m in mds), [
                    m.source for m in mds
                ]  # streamed, joined whole
                status = plain(app.query_one("#status").content)
                assert "36 tok" in status and "$0.0000" in status and "· ask ·" in status
                await type_and_send(pilot, app, "again")
                await wait_for(pilot, lambda: app.busy is None and app.query(".notice.error"), what="the error")
                err = texts(app)
                assert "invalid api key" in err.lower() or "rejected" in err.lower()
                await type_and_send(pilot, app, "and now?")
                await wait_for(pilot, lambda: app.busy is None and "Back again." in texts(app), what="recovery")
                assert app.is_running

        run(go())


@pytest.mark.integration
def test_esc_interrupts_keeping_what_was_done_and_enter_queues_while_busy(repo, tmp_path):
    with FakeOpenAIServer(
        [
            reply_tool("Read", {"file_path": "a.py"}, content="Step one."),
            reply_text("slow answer", delay_s=1.5),
            reply_text("Queued one answered."),
        ]
    ) as srv:
        rt = runtime(repo, "openai/fake-coder", tmp_path / "data", api_base=srv.api_base)
        app = chat_app(rt)

        async def go():
            async with app.run_test(size=(120, 40)) as pilot:
                await type_and_send(pilot, app, "start")
                await wait_for(pilot, lambda: any(t.status == "ok" for t in app.query(ToolCallLine)), what="tool")
                await type_and_send(pilot, app, "second question")
                assert list(app.queue) == ["second question"]
                assert "(queued)" in texts(app) and "1 queued" in plain(app.query_one("#status").content)
                await pilot.press("escape")
                await wait_for(pilot, lambda: "interrupted — everything done so far is kept" in texts(app), what="stop")
                await wait_for(pilot, lambda: app.busy is None and "Queued one answered." in texts(app), what="queue")

        run(go())
    stops = [r["reason"] for r in records(rt, "stopped")]
    assert stops == ["interrupted", "done"]
    users = [r["content"] for r in records(rt, "user_message")]
    assert users == ["start", "second question"]
    assert any("x = 1" in o for o in tool_outputs(rt))  # the Read done before Esc is kept


# -- commands, keys, layout ----------------------------------------------------------------------


def test_slash_commands_help_mode_export_unknown_and_completion(repo, tmp_path):
    model = replay_file(tmp_path / "r.jsonl", [{"content": "Hello there.", "tool_calls": []}])
    rt = runtime(repo, f"replay:{model}", tmp_path / "data")
    app = chat_app(rt)

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await type_and_send(pilot, app, "/optimise a.py::A")
            await wait_for(
                pilot, lambda: "unknown command /optimise — did you mean /optimize?" in texts(app), what="hint"
            )
            await type_and_send(pilot, app, "/help")
            await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
            shown = texts(app, app.screen)
            assert "/undo" in shown and "Revert the last change" in shown and "Ctrl+C twice" in shown
            await pilot.press("escape")
            await type_and_send(pilot, app, "/mode yolo")
            await wait_for(pilot, lambda: "· yolo ·" in plain(app.query_one("#status").content), what="mode")
            assert rt.permissions.mode == "yolo"
            await type_and_send(pilot, app, "/mode fast")
            await wait_for(pilot, lambda: "unknown permission mode 'fast'" in texts(app), what="bad mode")
            await type_and_send(pilot, app, "hi")
            await wait_for(pilot, lambda: app.busy is None and "Hello there." in texts(app), what="reply")
            await type_and_send(pilot, app, "/export chat.md")
            await wait_for(pilot, lambda: "exported the conversation" in texts(app), what="export")
            await type_and_send(pilot, app, "/context")
            await wait_for(pilot, lambda: "context: about" in texts(app), what="context")
            # completion popup after "/" and after "@"
            prompt = app.query_one("#prompt")
            await pilot.press("/", "h", "e")
            await pilot.pause()
            box = app.query_one("#completions")
            assert box.display and box.option_count == 1
            await pilot.press("tab")
            assert prompt.text == "/help " and not box.display
            prompt.load_text("see ")
            prompt.move_cursor(prompt.document.end)
            await pilot.press("@", "p", "k", "g", "/")
            await pilot.pause()
            assert box.display and box.get_option_at_index(0).id == "@pkg/m.py"
            await pilot.press("tab")
            assert prompt.text == "see @pkg/m.py "

    run(go())
    md = (repo / "chat.md").read_text()
    assert "## You\n\nhi" in md and "Hello there." in md


@pytest.mark.integration
def test_commands_that_cannot_run_while_busy_refuse_clearly(repo, tmp_path):
    with FakeOpenAIServer([reply_text("late", delay_s=1.0)]) as srv:
        rt = runtime(repo, "openai/fake-coder", tmp_path / "data", api_base=srv.api_base)
        app = chat_app(rt)

        async def go():
            async with app.run_test(size=(120, 40)) as pilot:
                await type_and_send(pilot, app, "hello")
                await wait_for(pilot, lambda: app.busy, what="busy")
                await type_and_send(pilot, app, "/undo")
                await wait_for(pilot, lambda: "/undo cannot run while the agent works" in texts(app), what="refusal")
                await type_and_send(pilot, app, "/cost")  # allowed while busy
                await wait_for(pilot, lambda: "this chat: $" in texts(app), what="cost")
                await wait_for(pilot, lambda: app.busy is None and "late" in texts(app), what="turn")

        run(go())


def test_history_up_down_and_ctrl_r_search(repo, tmp_path):
    model = replay_file(tmp_path / "r.jsonl", [])
    rt = runtime(repo, f"replay:{model}", tmp_path / "data")
    app = chat_app(rt)

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            prompt = app.query_one("#prompt")
            for text in ("/mode ask", "/context", "/cost"):
                await type_and_send(pilot, app, text)
                await pilot.pause()
            await pilot.press("up")
            assert prompt.text == "/cost"
            await pilot.press("up")
            assert prompt.text == "/context"
            await pilot.press("down")
            assert prompt.text == "/cost"
            await pilot.press("down")
            assert prompt.text == ""
            prompt.load_text("mode")
            await pilot.press("ctrl+r")
            assert prompt.text == "/mode ask"

    run(go())


def test_small_terminal_shows_a_clear_message(repo, tmp_path):
    model = replay_file(tmp_path / "r.jsonl", [])
    app = chat_app(runtime(repo, f"replay:{model}", tmp_path / "data"))

    async def go():
        async with app.run_test(size=(50, 12)) as pilot:
            await pilot.pause()
            msg = app.query_one("#too-small")
            assert msg.display and not app.query_one("#main").display
            assert "needs at least 60x16" in plain(msg.content)
            await pilot.resize_terminal(100, 30)
            await pilot.pause()
            assert not msg.display and app.query_one("#main").display

    run(go())


def test_ctrl_c_twice_quits_and_the_session_resumes_with_its_conversation(repo, tmp_path, monkeypatch):
    model = replay_file(
        tmp_path / "r.jsonl",
        [
            {"content": "Reading.", "tool_calls": [{"name": "Read", "arguments": {"file_path": "a.py"}}]},
            {"content": "Answer one.", "tool_calls": []},
            {"content": "Answer two.", "tool_calls": []},
        ],
    )
    rt = runtime(repo, f"replay:{model}", tmp_path / "data")
    app = chat_app(rt)

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await type_and_send(pilot, app, "first")
            await wait_for(pilot, lambda: app.busy is None and "Answer one." in texts(app), what="turn")
            await pilot.press("ctrl+c")
            await pilot.pause()
            assert app.is_running
            await pilot.press("ctrl+c")
            await pilot.pause()
        assert not app.is_running

    run(go())
    rt.close()
    # --resume: the same conversation comes back, and the model continues where it was.
    again = runtime(None, f"replay:{model}", tmp_path / "data", resume=rt.session_id)
    assert again.root == repo.resolve()
    app2 = chat_app(again)

    async def go2():
        async with app2.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            shown = texts(app2)
            assert "› first" in shown and "Answer one." in shown and f"resumed session {rt.session_id}" in shown
            line = app2.query_one(ToolCallLine)
            assert line.status == "ok" and "x = 1" in line.output
            await type_and_send(pilot, app2, "second")
            await wait_for(pilot, lambda: app2.busy is None and "Answer two." in texts(app2), what="turn 2")

    run(go2())
    # --continue picks the latest chat session of the repository it runs in.
    monkeypatch.chdir(repo)
    latest = runtime(None, f"replay:{model}", tmp_path / "data", continue_latest=True)
    assert latest.session_id == rt.session_id


def test_bad_input_before_the_app_opens(repo, tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(EnvironmentMissing, match="ANTHROPIC_API_KEY is not set"):
        runtime(repo, "anthropic/claude-sonnet-4-5", tmp_path / "data")
    with pytest.raises(BadInput, match="is not a folder"):
        runtime(repo / "nope", "replay:x", tmp_path / "data")


def test_chat_without_a_terminal_exits_2_with_a_hint(tmp_path):
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_agent_cli", "chat", str(tmp_path)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "needs an interactive terminal" in proc.stderr and "optimize TARGET --batch" in proc.stderr


def test_ledger_panel_toggles_with_a_key(repo, tmp_path):
    model = replay_file(tmp_path / "r.jsonl", [])
    rt = runtime(repo, f"replay:{model}", tmp_path / "data")
    app = chat_app(rt)

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()  # the ledger is mounted after the first frame
            ledger = app.query_one(LedgerPanel)
            assert not ledger.display
            await pilot.press("ctrl+l")
            assert ledger.display
            await pilot.press("f2")
            assert not ledger.display

    run(go())


def test_cuda_agent_sessions_lists_chat_sessions(repo, tmp_path):
    model = replay_file(tmp_path / "r.jsonl", [])
    data = tmp_path / "xdg" / "cuda-agent"
    rt = runtime(repo, f"replay:{model}", data)
    rt.ensure_started()
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "xdg")}
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_agent_cli", "sessions", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    assert [(s["session_id"], s["kind"]) for s in found] == [(rt.session_id, "chat")]
    text = subprocess.run(
        [sys.executable, "-m", "cuda_agent_cli", "sessions"], capture_output=True, text=True, env=env, timeout=60
    ).stdout
    assert "KIND" in text and " chat " in text and "cuda-agent chat --resume ID" in text


@pytest.mark.integration
def test_bang_command_runs_in_the_sandbox_and_shows_its_output(repo, tmp_path):
    from cuda_agent_cli.sandbox import probe

    if not probe().available:
        pytest.skip("bubblewrap is not usable here")
    model = replay_file(tmp_path / "r.jsonl", [])
    rt = runtime(repo, f"replay:{model}", tmp_path / "data")
    app = chat_app(rt)

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await type_and_send(pilot, app, "!cat a.py; echo secret=$ANTHROPIC_API_KEY; touch made.txt")
            line = await wait_for(
                pilot, lambda: [t for t in app.query(ToolCallLine) if t.status in ("ok", "error")], what="the command"
            )
            line = line[0]
            assert line.expanded and "x = 1" in line.output and "secret=\n" in line.output + "\n"
            assert "x = 1" in plain(line.query_one(".tool-body").content)

    os.environ["ANTHROPIC_API_KEY"] = "sk-test-not-real"
    try:
        run(go())
    finally:
        del os.environ["ANTHROPIC_API_KEY"]
    assert (repo / "made.txt").exists()  # the repository is writable from the sandbox


def test_bang_command_is_kept_for_export_and_a_resumed_chat_but_not_sent_to_the_model(repo, tmp_path):
    from cuda_agent_cli.sandbox import probe

    if not probe().available:
        pytest.skip("bubblewrap is not usable here")
    model = replay_file(tmp_path / "r.jsonl", [{"content": "Noted.", "tool_calls": []}])
    rt = runtime(repo, f"replay:{model}", tmp_path / "data")
    app = chat_app(rt)
    command = "echo shell-said-$((6*7)); cat a.py"

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            await type_and_send(pilot, app, "!" + command)
            await wait_for(pilot, lambda: app.busy is None and any(t.status == "ok" for t in app.query(ToolCallLine)))
            await type_and_send(pilot, app, "hi")
            await wait_for(pilot, lambda: app.busy is None and "Noted." in texts(app), what="the reply")
            await type_and_send(pilot, app, "/export chat.md")
            await wait_for(pilot, lambda: "exported the conversation" in texts(app), what="export")

    run(go())
    rt.close()
    shell = records(rt, "shell_command")
    assert [(r["command"], r["is_error"]) for r in shell] == [(command, False)]
    assert "shell-said-42" in shell[0]["output"] and "x = 1" in shell[0]["output"]
    md = (repo / "chat.md").read_text()
    assert f"$ {command}" in md and "shell-said-42" in md
    assert md.index("shell-said-42") < md.index("## You\n\nhi") < md.index("Noted.")
    assert not any("shell-said" in str(m.get("content")) for m in rt.state.messages)

    again = runtime(None, f"replay:{model}", tmp_path / "data", resume=rt.session_id)
    resumed = chat_app(again)

    async def look():
        async with resumed.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            shown = texts(resumed)
            assert f"› !{command}" in shown and "shell-said-42" in shown
            assert shown.index(f"› !{command}") < shown.index("shell-said-42") < shown.index("› hi")
            line = resumed.query_one(ToolCallLine)
            assert line.expanded and line.status == "ok" and "x = 1" in plain(line.query_one(".tool-body").content)

    run(look())
    again.close()
    assert not any("shell-said" in str(m.get("content")) for m in again.state.messages)


def test_optimize_takes_capture_and_refuses_it_with_inputs_in_one_line(tmp_path):
    blend = "import torch\n\n\nclass Blend(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
    repo = make_repo(tmp_path / "repo", {"mixers/blend.py": blend})
    model = replay_file(tmp_path / "r.jsonl", [])
    rt = runtime(repo, f"replay:{model}", tmp_path / "data", device="cpu")
    app = chat_app(rt)
    command = f"{sys.executable} -c 'print(42)'"

    async def go():
        async with app.run_test(size=(160, 40)) as pilot:
            await type_and_send(pilot, app, '/optimize mixers/blend.py::Blend --inputs "x=float32[4]" --capture true')
            refusal = "--inputs and --capture both say which calls to optimize for — give one of them, not both"
            await wait_for(pilot, lambda: refusal in texts(app), what="the refusal")
            assert app.busy is None and not rt.optimize_sessions
            # The runner takes the command as `optimize --capture` does: it runs it, and says it
            # never called the class.
            await type_and_send(pilot, app, f'/optimize mixers/blend.py::Blend --capture "{command}"')
            await wait_for(
                pilot,
                lambda: app.busy is None and "without calling Blend.forward" in texts(app),
                timeout=180,
                what="the capture",
            )
            assert f"--capture: `{command}` exited with 0: 42" in texts(app)
            await type_and_send(pilot, app, "/help")
            await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
            assert '--capture "CMD"' in texts(app, app.screen)

    run(go())


def test_diff_compact_clear_sessions_resume_and_model_commands(repo, tmp_path):
    turns = [{"content": f"Answer {i}.", "tool_calls": []} for i in range(8)]
    model = replay_file(tmp_path / "r.jsonl", turns)
    rt = runtime(repo, f"replay:{model}", tmp_path / "data", mode="yolo")
    other = runtime(repo, f"replay:{model}", tmp_path / "data")
    other.ensure_started()
    other.close()
    app = chat_app(rt)

    async def go():
        async with app.run_test(size=(120, 40)) as pilot:
            for i in range(4):
                await type_and_send(pilot, app, f"question {i}")
                await wait_for(pilot, lambda: app.busy is None and f"Answer {i}." in texts(app), what=f"turn {i}")
            (repo / "a.py").write_text("x = 42\n")
            await type_and_send(pilot, app, "/diff")
            await wait_for(pilot, lambda: "+x = 42" in texts(app), what="diff")
            await type_and_send(pilot, app, "/compact")
            await wait_for(pilot, lambda: "compacted" in texts(app), what="compact")
            assert rt.state.compactions == 1
            await type_and_send(pilot, app, "/model replay:nowhere.jsonl")
            await wait_for(pilot, lambda: "replay file nowhere.jsonl does not exist" in texts(app), what="bad model")
            await type_and_send(pilot, app, "/sessions")
            await wait_for(pilot, lambda: other.session_id in texts(app), what="sessions")
            await type_and_send(pilot, app, "/clear")
            await wait_for(pilot, lambda: "Answer 0." not in texts(app), what="clear")
            await type_and_send(pilot, app, f"/resume {other.session_id}")
            await wait_for(pilot, lambda: app.backend.session_id == other.session_id, what="resume")
            await type_and_send(pilot, app, "/resume")
            await wait_for(pilot, lambda: "/resume needs a session id" in texts(app), what="resume without id")

    run(go())
    kinds = [r["event"] for r in read_records(rt.state.transcript_path)]
    assert "compacted" in kinds

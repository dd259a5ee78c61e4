"""Bash, BashOutput, KillBash semantics. These run the shell unconfined (fast); the same tools
under bubblewrap are exercised in test_sandbox_attacks.py."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cuda_agent_cli.actions import ActionContext, Toolbox, make_toolbox
from cuda_agent_cli.sandbox import Sandbox, SandboxPolicy, SandboxStatus


@pytest.fixture
def tb(tmp_path: Path):
    ws = tmp_path / "ws"
    (ws / "kernels").mkdir(parents=True)
    sb = Sandbox(
        SandboxPolicy.optimize(ws, [], sandbox_uid=None, sandbox_gid=None),
        SandboxStatus(False, "unit tests"),
        enabled=False,
    )
    sb.prepare()
    box = make_toolbox(ActionContext(sb))
    yield box
    box.close()


def test_output_and_exit_codes(tb: Toolbox) -> None:
    ok = tb.call("Bash", {"command": "echo out; echo err >&2", "description": "print twice"})
    assert not ok.is_error and ok.output == "out\nerr\n" and ok.data["exit_code"] == 0
    bad = tb.call("Bash", {"command": "echo partial; exit 3"})
    assert bad.is_error and "partial" in bad.output and "exit code 3" in bad.output
    quiet = tb.call("Bash", {"command": "true"})
    assert quiet.output == "(no output)"
    assert tb.call("Bash", {"command": "   "}).is_error


def test_runs_in_the_workspace_with_a_scrubbed_environment(tb: Toolbox, monkeypatch: pytest.MonkeyPatch) -> None:
    r = tb.call("Bash", {"command": "pwd; echo key=${ANTHROPIC_API_KEY:-none}"})
    assert r.output.splitlines()[0] == str(tb.ctx.root)
    assert "key=none" in r.output


def test_timeout_kills_the_whole_process_group(tb: Toolbox) -> None:
    marker = tb.ctx.root / "kernels" / "late"
    started = time.monotonic()
    r = tb.call("Bash", {"command": "echo begun; (sleep 1; touch kernels/late) & sleep 30", "timeout": 300})
    took = time.monotonic() - started
    assert r.is_error and r.data["timed_out"] and "timed out after 0.3 s" in r.output
    assert "begun" in r.output
    assert took < 5
    time.sleep(1.3)
    assert not marker.exists()


def test_background_shell_ids_incremental_output_and_filter(tb: Toolbox) -> None:
    r = tb.call(
        "Bash", {"command": "for i in 1 2 3; do echo line$i; echo noise$i; sleep 0.3; done", "run_in_background": True}
    )
    assert r.data["bash_id"] == "bash_1" and "bash_1" in r.output
    second = tb.call("Bash", {"command": "sleep 30", "run_in_background": True})
    assert second.data["bash_id"] == "bash_2"
    time.sleep(0.15)
    first = tb.call("BashOutput", {"bash_id": "bash_1"})
    assert "line1" in first.output and "line3" not in first.output and first.data["status"] == "running"
    time.sleep(1.2)
    rest = tb.call("BashOutput", {"bash_id": "bash_1", "filter": "^line"})
    assert "line1" not in rest.output  # only what is new since the last read
    assert "line2" in rest.output and "line3" in rest.output and "noise" not in rest.output
    assert rest.data["status"] == "completed"
    again = tb.call("BashOutput", {"bash_id": "bash_1"})
    assert "(no new output)" in again.output
    killed = tb.call("KillBash", {"shell_id": "bash_2"})
    assert not killed.is_error and killed.data["status"] == "killed"
    assert "already finished" in tb.call("KillBash", {"shell_id": "bash_1"}).output


def test_unknown_shell_ids_list_the_known_ones(tb: Toolbox) -> None:
    tb.call("Bash", {"command": "true", "run_in_background": True})
    r = tb.call("BashOutput", {"bash_id": "bash_9"})
    assert r.is_error and "bash_1" in r.output
    assert tb.call("KillBash", {"shell_id": "nope"}).is_error


def test_failed_background_command_reports_its_exit_code(tb: Toolbox) -> None:
    tb.call("Bash", {"command": "echo x; exit 4", "run_in_background": True})
    time.sleep(0.3)
    r = tb.call("BashOutput", {"bash_id": "bash_1"})
    assert "exit code 4" in r.output and r.data["exit_code"] == 4


def test_close_kills_background_shells(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    sb = Sandbox(
        SandboxPolicy.optimize(ws, [], sandbox_uid=None, sandbox_gid=None),
        SandboxStatus(False, "unit tests"),
        enabled=False,
    )
    box = make_toolbox(ActionContext(sb))
    box.call("Bash", {"command": "sleep 60", "run_in_background": True})
    proc = box.ctx.shells.get("bash_1").proc
    box.close()
    assert proc.poll() is not None


def test_huge_output_is_capped_and_saved_for_read(tb: Toolbox) -> None:
    r = tb.call("Bash", {"command": "seq 1 40000"})
    assert len(r.output) <= 30_000
    assert r.output.startswith("1\n2\n") and r.output.rstrip().endswith("40000")
    saved = next(w for w in r.output.split() if "tool-output" in w)
    assert Path(saved).read_text().count("\n") == 40000
    assert Path(saved).is_relative_to(tb.ctx.root / "scratch")


def test_output_buffers_stay_bounded() -> None:
    from cuda_agent_cli.actions.shell import HeadTail, Unread

    ht = HeadTail(keep=10)
    for i in range(100):
        ht.append(f"{i:03d}|".encode())
    text = ht.text()
    assert text.startswith("000|001|00") and text.endswith("098|099|")
    assert "bytes of output dropped" in text and len(ht.head) == 10 and len(ht.tail) == 10
    un = Unread(limit=8)
    un.append(b"abcdefghij")
    assert un.take() == "[... 2 bytes of output dropped before this read ...]\ncdefghij"
    assert un.take() == ""


def test_a_flood_of_output_does_not_exhaust_memory(tb: Toolbox) -> None:
    r = tb.call("Bash", {"command": "head -c 50000000 /dev/zero | tr '\\0' 'x'; echo; echo END"})
    assert not r.is_error and len(r.output) <= 30_000
    assert r.output.rstrip().endswith("END")


def test_timeout_defaults_to_two_minutes_and_is_given_in_milliseconds(
    tb: Toolbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cuda_agent_cli.actions import shell

    seen: list[float] = []

    def fake(ctx, command, timeout_s):
        seen.append(timeout_s)
        return "", 0, False, 0.0

    monkeypatch.setattr(shell, "run_foreground", fake)
    tb.call("Bash", {"command": "true"})
    tb.call("Bash", {"command": "true", "timeout": 600000})
    assert seen == [120.0, 600.0]
    assert tb.call("Bash", {"command": "true", "timeout": 600001}).is_error


def test_a_daemon_holding_the_pipe_does_not_stall_the_call(tb: Toolbox) -> None:
    started = time.monotonic()
    r = tb.call("Bash", {"command": "(setsid sleep 4 &); echo done", "timeout": 60_000})
    assert not r.is_error and "done" in r.output and not r.data["timed_out"]
    assert time.monotonic() - started < 3.5

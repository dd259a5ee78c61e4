"""Whole sessions through litellm's real HTTP path against the fake OpenAI-compatible server:
native tools and the text protocol, malformed calls, a rate-limit retry, a budget stop, a
compaction, and a resume after the process running the session is killed mid-turn."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuda_agent_cli.agent.events import Compacted, Event, HarnessResultEvent, Retrying, TextDelta
from cuda_agent_cli.agent.loop import Limits, run_agent
from cuda_agent_cli.agent.session_store import load_session, new_session, summarize
from cuda_agent_cli.agent.transcript import read_records
from cuda_agent_cli.harness_result import HarnessResult
from cuda_agent_cli.model.factory import make_model
from cuda_agent_cli.model.fake_server import FakeOpenAIServer, reply_error, reply_text, reply_tool

pytestmark = pytest.mark.integration
TESTS = Path(__file__).resolve().parents[1]  # tests/, where agent_toybox.py lives


class Outcome(HarnessResult):
    def summary(self) -> str:
        return f"compiled={self.compiled} correct={self.correct}"


class FileJudgedHarness:
    """Judges the candidate by what model_new.py really contains on disk."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _result(self, timed: bool) -> Outcome:
        src = (self.root / "model_new.py").read_text() if (self.root / "model_new.py").is_file() else ""
        correct = "class ModelNew" in src
        fast = "fused" in src
        timings = (
            {
                "eager_us": 20.0,
                "compile_us": 15.0,
                "candidate_us": 10.0 if fast else 19.0,
                "speedup_vs_eager": 2.0 if fast else 1.05,
                "speedup_vs_compile": 1.5 if fast else 0.8,
                "method": "events",
                "trials": 50,
            }
            if (timed and correct)
            else None
        )
        reward = (3 if fast else 1) if (timed and correct) else (None if correct else -1)
        return Outcome.from_json(
            {
                "compiled": True,
                "correct": correct,
                "reward": reward,
                "device": "cpu",
                "policy": "strict",
                "errors": [],
                "warnings": [],
                "checks": [],
                "timings": timings,
                "environment": {"gpu": None, "torch": "2.13", "cuda": None},
            }
        )

    def compile(self) -> Outcome:
        return self._result(False)

    def verify(self) -> Outcome:
        return self._result(False)

    def profile(self) -> Outcome:
        return self._result(True)


@pytest.fixture()
def toolbox(tmp_path):
    from cuda_agent_cli.actions import ActionContext, make_toolbox
    from cuda_agent_cli.sandbox import SandboxPolicy, open_sandbox

    root = tmp_path / "workspace"
    (root / "kernels").mkdir(parents=True)
    (root / "model.py").write_text(
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x.relu()\n"
    )
    sandbox = open_sandbox(SandboxPolicy.optimize(root, ["model.py"]), allow_unsafe=True)
    box = make_toolbox(ActionContext(sandbox, harness=FileJudgedHarness(root)))
    yield box, root
    box.close()


def _model(srv, **kw):
    return make_model("openai/fake-coder", srv.api_base, backoff_base=0.01, **kw)


def _wire(messages):
    # litellm leaves out keys whose value is None when it sends a message.
    return [{k: v for k, v in m.items() if v is not None} for m in messages]


def _tool_msgs(body):
    return [m for m in body["messages"] if m["role"] == "tool"]


def test_native_session_with_real_tools_retry_and_malformed_calls(toolbox, tmp_path):
    box, root = toolbox
    script = [
        reply_tool("Read", {"file_path": "model.py"}, content="Reading the reference first."),
        reply_tool("Write", {"file_path": "model_new.py"}),  # missing content
        reply_error(429, "rate limited, slow down", retry_after=0.01),
        reply_tool("Write", {"file_path": "model_new.py", "content": "class ModelNew:\n    pass  # naive\n"}),
        reply_tool("Profile", {}),
        reply_tool("Write", {"file_path": "model_new.py", "content": "class ModelNew:\n    pass  # fused\n"}),
        reply_tool("Profile", {}),
        reply_tool("Write", {"file_path": "model_new.py", "content": "broken"}),
        reply_tool("Profile", {}),
        reply_tool("Bash", {"command": "ls kernels && cat model_new.py"}),
        reply_text("The fused kernel is 1.5x faster than torch.compile."),
    ]
    events: list[Event] = []
    with FakeOpenAIServer(script) as srv:
        state = new_session(data_dir=tmp_path / "data")
        result = run_agent(
            _model(srv),
            box,
            state=state,
            prompt="Optimize model.py::Model",
            system_prompt="SKILL",
            target="model.py::Model",
            settings={"policy": "strict"},
            workspace_root=root,
            sink=events.append,
        )
        requests = srv.requests
    assert result.stop_reason == "done" and result.turns == 10
    assert result.final_text == "The fused kernel is 1.5x faster than torch.compile."
    # The Read result reached the model over HTTP.
    assert "return x.relu()" in _tool_msgs(requests[1])[0]["content"]
    # The malformed Write was answered with the precise problem, and nothing was written.
    assert _tool_msgs(requests[2])[-1]["content"] == "Error: Write: missing required argument(s) content."
    # The 429 was retried with the same conversation.
    assert requests[2]["messages"] == requests[3]["messages"]
    assert any(isinstance(e, Retrying) and e.reason == "rate limited" for e in events)
    assert any(isinstance(e, TextDelta) for e in events)
    # The best candidate is the fused one, not the broken last one; its files were snapshotted.
    assert result.best.result.reward == 3
    assert "fused" in (Path(result.best.snapshot) / "model_new.py").read_text()
    assert (root / "model_new.py").read_text() == "broken"
    assert [e.best for e in events if isinstance(e, HarnessResultEvent)] == [True, True, False]
    # The Bash call ran in the sandbox for real.
    assert (
        "fused" not in _tool_msgs(requests[-1])[-1]["content"] and "broken" in _tool_msgs(requests[-1])[-1]["content"]
    )
    doc = result.to_json()
    assert doc["session_id"] == state.session_id and Path(doc["transcript"]).is_file()


def test_text_protocol_session_with_malformed_json_and_a_turn_budget(toolbox, tmp_path):
    box, root = toolbox
    script = [
        reply_text(
            'I will write it.\n<tool_call>{"name": "Write", "arguments": {"file_path": "model_new.py", '
            '"content": "class ModelNew: pass"}}</tool_call>'
        ),
        reply_text('<tool_call>{"name": "Profile", "arguments": {}</tool_call>'),  # broken JSON
        reply_text('<tool_call>{"name": "Profile", "arguments": {}}</tool_call>'),
        reply_text('<tool_call>{"name": "Read", "arguments": {"file_path": "model_new.py"}}</tool_call>'),
    ]
    with FakeOpenAIServer(script) as srv:
        state = new_session(data_dir=tmp_path / "data")
        result = run_agent(
            _model(srv, native_tools=False),
            box,
            state=state,
            prompt="go",
            system_prompt="SKILL",
            workspace_root=root,
            limits=Limits(max_turns=3),
        )
        requests = srv.requests
    assert result.stop_reason == "max_turns" and result.turns == 3 and len(requests) == 3
    assert all("tools" not in r for r in requests)
    assert "<tool_call>" in requests[0]["messages"][0]["content"]
    assert (root / "model_new.py").read_text() == "class ModelNew: pass"
    second = requests[1]["messages"][-1]
    assert second["role"] == "user" and '<tool_result name="Write">' in second["content"]
    third = requests[2]["messages"][-1]["content"]
    assert "Malformed tool call: not valid JSON" in third
    assert load_session(state.session_id, tmp_path / "data").status == "max_turns"


def test_compaction_when_the_server_reports_a_full_context(toolbox, tmp_path):
    box, root = toolbox
    script = [reply_tool("Profile", {}, prompt_tokens=500)]
    script += [
        reply_tool(
            "Write",
            {"file_path": f"kernels/k{i}.cpp", "content": f"// {i}"},
            content=f"step {i}",
            prompt_tokens=1000 + 400 * i,
        )
        for i in range(10)
    ]
    script += [reply_text("done", prompt_tokens=900)]
    events: list[Event] = []
    with FakeOpenAIServer(script) as srv:
        state = new_session(data_dir=tmp_path / "data")
        result = run_agent(
            _model(srv),
            box,
            state=state,
            prompt="the task",
            system_prompt="SKILL",
            settings={"policy": "hybrid"},
            workspace_root=root,
            limits=Limits(context_tokens=4000),
            sink=events.append,
        )
        requests = srv.requests
    compactions = [e for e in events if isinstance(e, Compacted)]
    assert result.stop_reason == "done" and compactions
    after = requests[-1]["messages"]
    assert after[0]["content"] == "SKILL" and after[1]["content"] == "the task"
    assert after[2]["content"].startswith("[Summary") and "hybrid" in after[2]["content"]
    # Without compaction the last request would carry all 11 tool turns (24 messages).
    assert len(after) < 24 and after[3]["role"] == "assistant"
    assert load_session(state.session_id, tmp_path / "data").messages == state.messages


_CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from agent_toybox import ToyBox
from cuda_agent_cli.agent.loop import run_agent
from cuda_agent_cli.agent.session_store import new_session
from cuda_agent_cli.model.factory import make_model
cfg = json.loads(sys.argv[2])
state = new_session(data_dir=Path(cfg["data"]), session_id=cfg["sid"])
model = make_model("openai/fake-coder", cfg["api_base"])
run_agent(model, ToyBox(Path(cfg["ws"])), state=state, prompt="the task", system_prompt="SKILL",
          target="m.py::Model", workspace_root=Path(cfg["ws"]))
"""


def test_resume_after_the_process_is_killed_mid_turn(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    data = tmp_path / "data"
    script = [
        reply_tool("Write", {"file_path": "model_new.py", "content": "v1"}, content="writing v1"),
        reply_tool("Read", {"file_path": "model_new.py"}),
        reply_text("this reply never arrives", delay_s=60),
        reply_text("resumed: finished"),
    ]
    with FakeOpenAIServer(script) as srv:
        cfg = {"data": str(data), "sid": "killed-session", "api_base": srv.api_base, "ws": str(ws)}
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(TESTS), json.dumps(cfg)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 90
            while len(srv.requests) < 3:  # the third request is the one held open
                assert child.poll() is None, child.stdout.read().decode()
                assert time.monotonic() < deadline, "the session never reached its third turn"
                time.sleep(0.05)
            time.sleep(0.1)
            os.kill(child.pid, signal.SIGKILL)
            child.wait(10)
        finally:
            if child.poll() is None:
                child.kill()
        assert child.returncode == -signal.SIGKILL
        in_flight = srv.requests[2]["messages"]

        state = load_session("killed-session", data)
        assert state.turns == 2 and state.status == "running"
        assert summarize(state).status == "unfinished"
        # Nothing recorded before the kill is lost: the conversation is exactly what was in flight.
        assert _wire(state.messages) == in_flight
        assert (ws / "model_new.py").read_text() == "v1"

        from agent_toybox import ToyBox

        result = run_agent(make_model("openai/fake-coder", srv.api_base), ToyBox(ws), state=state)
        assert result.stop_reason == "done" and result.final_text == "resumed: finished"
        assert srv.requests[3]["messages"] == in_flight
        assert result.turns == 3
    kinds = [r["event"] for r in read_records(state.transcript_path)]
    assert kinds.count("session_started") == 1 and "resumed" in kinds and kinds[-1] == "stopped"

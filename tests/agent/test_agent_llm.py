"""One short session with a real model (opt-in): CUDA_AGENT_TEST_MODEL=anthropic/claude-... ,
plus CUDA_AGENT_TEST_API_BASE for a local server. Skipped when unset."""

from __future__ import annotations

import os

import pytest
from agent_toybox import ToyBox

from cuda_agent_cli.agent.loop import Limits, run_agent
from cuda_agent_cli.agent.session_store import new_session
from cuda_agent_cli.model.factory import make_model

pytestmark = pytest.mark.llm


@pytest.mark.skipif(not os.environ.get("CUDA_AGENT_TEST_MODEL"), reason="set CUDA_AGENT_TEST_MODEL to run")
def test_a_real_model_reads_a_file_and_answers(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("The launch configuration word is PERIWINKLE.\n")
    model = make_model(os.environ["CUDA_AGENT_TEST_MODEL"], os.environ.get("CUDA_AGENT_TEST_API_BASE"))
    box = ToyBox(ws)
    state = new_session(data_dir=tmp_path / "data")
    result = run_agent(
        model,
        box,
        state=state,
        system_prompt="You are a careful assistant. Use the tools.",
        prompt="Read notes.txt with the Read tool and reply with the launch configuration word only.",
        workspace_root=ws,
        limits=Limits(max_turns=6, max_cost=0.50, timeout=300),
    )
    assert result.stop_reason == "done"
    assert ("Read", {"file_path": "notes.txt"}) in [
        (n, {k: v for k, v in a.items() if k == "file_path"}) for n, a in box.calls
    ]
    assert "PERIWINKLE" in (result.final_text or "").upper()

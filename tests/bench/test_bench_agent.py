"""Agent mode over the project's suite with recorded sessions, one replay file per task.

The agent runs for real (tools, sandbox, harness); only the model's side is recorded. Each task
gets its own session workspace under --out, and the best verified candidate is scored anew.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from demo_repo import suite_env

pytestmark = pytest.mark.integration

SUITE = Path(__file__).resolve().parents[1] / "bench_suite"


def test_agent_bench_with_replay_sessions(tmp_path: Path, harness_cache_root: Path):
    env = suite_env()
    env.update(
        XDG_DATA_HOME=str(tmp_path / "data"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_CACHE_HOME=str(harness_cache_root),
    )
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_agent_cli",
            "bench",
            "--suite",
            "kernelbench",
            "--root",
            str(SUITE),
            "--level",
            "1",
            "--tasks",
            "1,3,4",
            "--model",
            f"replay:{SUITE / 'agent'}",
            "--max-turns",
            "6",
            "--device",
            "cpu",
            "--out",
            str(out),
            "--trials",
            "5",
            "--plain",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    records = {r["task"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert sorted(records) == ["level1/1_ReLU", "level1/3_RowSum", "level1/4_Square"]
    honest, bypass, missing = (records[k] for k in sorted(records))
    assert honest["status"] == "correct" and honest["reward"] in (1, 2, 3), honest
    assert honest["turns"] == 4 and honest["cost_usd"] == 0 and honest["stop_reason"] == "done"
    assert honest["best"]["timings"]["speedup_vs_eager"] == honest["speedup_vs_eager"]
    # Its own session workspace, inside --out: nothing went to the user's session store.
    session = out / "agent" / "sessions" / honest["session_id"]
    assert (session / "workspace" / "kernels" / "relu.cpp").is_file()
    assert not (tmp_path / "data" / "cuda-agent").exists()
    assert bypass["status"] == "failed" and bypass["turns"] == 3 and "no correct candidate" in bypass["error"]
    # A task without a recorded session is that task's error; the run went on.
    assert missing["status"] == "error" and "replay file" in missing["error"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["overall"]["turns"]["total"] == 7 and summary["settings"]["mode"] == "agent"
    assert summary["overall"]["pass_rate"] == pytest.approx(1 / 3)

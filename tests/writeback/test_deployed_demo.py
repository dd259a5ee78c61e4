"""The applied CPU demo in the user's own process, under torch.compile in its three usual modes:
one graph, no graph break, the kernel's op in it, the original's result (benchmarks/deployed_check.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from demo_repo import clean_env, shared_cpu_demo

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "deployed_check.py"


def test_the_applied_demo_compiles_to_one_graph_that_calls_the_kernel(tmp_path: Path, harness_cache_root: Path):
    result = shared_cpu_demo(harness_cache_root, tmp_path / "demo")
    assert result["applied"] is True
    first = result["deployment"]["families"][0]
    assert first["taken"] and first["compile"] == {"graphs": 1, "graph_breaks": 0, "calls_op": True}
    run = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "demo"), "--json"],
        env=clean_env(tmp_path, harness_cache_root),
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    modes = json.loads(run.stdout)["modes"]
    assert set(modes) == {"default", "fullgraph", "max-autotune"}
    for name, row in modes.items():
        assert row == {"graphs": 1, "graph_breaks": 0, "calls_op": True, "matches": True}, name

"""The applied CUDA demo as the user's program runs it, on the GPU: torch.compile (default,
fullgraph=True, max-autotune without CUDA graphs) makes one graph without a break that calls the
kernel's op and matches; the review's time per call as Python makes it is printed beside the
harness's device time, and the compiled patched module beside the compiled original.

Run on the GPU machine: pytest -m gpu -s tests/gpu/test_deployed_gpu.py
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "deployed_check.py"


def test_the_applied_cuda_demo_compiles_to_one_graph_that_calls_the_kernel(tmp_path: Path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_AGENT_") and not k.endswith("_API_KEY")}
    env.update(XDG_DATA_HOME=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path / "config"))
    where = tmp_path / "demo"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_agent_cli",
            "demo",
            "--device",
            "cuda",
            "--dir",
            str(where),
            "--batch",
            "--json",
            "--yes",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["applied"] is True
    first = result["deployment"]["families"][0]
    assert first["taken"] and first["matches"] and first["gradients"]["match"]
    assert first["compile"] == {"graphs": 1, "graph_breaks": 0, "calls_op": True}
    device = result["speedups"]["vs_eager"]
    print(
        f"\ndevice time: {device:.2f}x vs eager; as Python calls it: {first['speedup_per_call']:.2f}x "
        f"{first['speedup_per_call_interval']} ({first['patched_us_per_call']} us against "
        f"{first['original_us_per_call']} us a call); within 15%: {first['speedup_per_call'] >= 0.85 * device}"
    )
    run = subprocess.run(
        [sys.executable, str(SCRIPT), str(where), "--json", "--time"],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout)
    print(json.dumps(report, indent=1))
    for name, row in report["modes"].items():
        assert (row["graphs"], row["graph_breaks"], row["calls_op"], row["direct_cpp"], row["matches"]) == (
            1,
            0,
            True,
            True,
            True,
        ), name

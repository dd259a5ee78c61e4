"""Every shape the program uses, end to end on the CPU: --capture counts a script's calls at three
signatures (two shapes of one instance, another instance), the kernel is verified and timed at
each, applied for all of them, and `trace` shows every call of the script taking it."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from demo_repo import suite_env

from cuda_agent_cli.demo import replay_path

pytestmark = pytest.mark.integration

HEADS = '''\
import torch
from torch import nn


class PooledLayerNorm(nn.Module):
    """Normalize every token, then average over the tokens."""

    def __init__(self, dim: int = 768, eps: float = 1e-6) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x).mean(dim=1)
'''

TRAIN = """\
import torch
from models.heads import PooledLayerNorm

big, small = PooledLayerNorm(384), PooledLayerNorm(256)
with torch.no_grad():
    for _ in range(6):
        big(torch.randn(8, 256, 384))
    for _ in range(3):
        big(torch.randn(4, 64, 384))
    for _ in range(2):
        small(torch.randn(2, 32, 256))
print("done")
"""


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.fixture(scope="module")
def applied(tmp_path_factory: pytest.TempPathFactory, harness_cache_root: Path):
    tmp = tmp_path_factory.mktemp("shapes")
    root = tmp / "repo"
    (root / "models").mkdir(parents=True)
    (root / "models" / "__init__.py").write_text("")
    (root / "models" / "heads.py").write_text(HEADS)
    (root / "train.py").write_text(TRAIN)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "start")
    env = suite_env()
    env.update(
        XDG_DATA_HOME=str(tmp / "data"), XDG_CONFIG_HOME=str(tmp / "config"), XDG_CACHE_HOME=str(harness_cache_root)
    )

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "cuda_agent_cli", *args],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=1200,
        )

    proc = cli(
        "optimize",
        "models/heads.py::PooledLayerNorm",
        "--model",
        f"replay:{replay_path('cpu')}",
        "--device",
        "cpu",
        "--capture",
        f"{sys.executable} train.py",
        "--batch",
        "--json",
        "--yes",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root, cli, json.loads(proc.stdout), proc.stderr


def test_every_captured_signature_is_verified_timed_and_integrated(applied):
    root, _, result, stderr = applied
    assert "3 signatures" in stderr
    cases = result["shapes"]["cases"]
    assert [c["count"] for c in cases] == [6, 3, 2]
    assert cases[0]["inputs"].startswith("float32[8,256,384]") and cases[0]["first"]
    assert all(c["correct"] and c["kernel_us"] > 0 for c in cases)
    assert result["shapes"]["speedup_vs_eager"] > 0
    verified = json.loads((root / "models/_cuda_agent/pooled_layer_norm/verified.json").read_text())
    used = [c for c in cases if c["used"]]
    assert len(verified["families"]) == len(used) and cases[0]["used"]
    manifest = (root / ".cuda-agent/kernels.toml").read_text()
    assert "shapes = [" in manifest and "speedup_per_call" in manifest
    # applied with --capture: the captured command timed with and without the kernel
    end_to_end = result["end_to_end"]
    assert end_to_end["kernels"][0]["taken"] > 0 and end_to_end["wall"]["speedup"] > 0
    assert "ms ->" in stderr and "runs each way" in stderr


def test_the_kernel_was_tried_as_the_program_runs_it(applied):
    _, _, result, _ = applied
    deployment = result["deployment"]
    assert deployment["error"] is None
    first = deployment["families"][0]
    assert first["taken"] and first["matches"]
    assert first["compile"] == {"graphs": 1, "graph_breaks": 0, "calls_op": True}
    assert first["gradients"]["checked"] and first["gradients"]["match"]
    assert first["speedup_per_call"] > 0 and first["patched_us_per_call"] > 0


def test_trace_shows_every_call_at_the_used_shapes_taking_the_kernel(applied):
    root, cli, result, _ = applied
    proc = cli("trace", "--json", "--repeat", "1", "--", sys.executable, "train.py")
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    (kernel,) = report["kernels"]
    used_calls = sum(c["count"] for c in result["shapes"]["cases"] if c["used"])
    assert kernel["calls"] == 11 and kernel["taken"] == used_calls
    assert report["wall"]["speedup"] > 0 and len(report["wall"]["with_kernels_s"]) == 1


def test_trace_of_a_failing_command_gives_its_exit_code_and_last_line(applied):
    root, cli, _, _ = applied
    (root / "broken.py").write_text(textwrap.dedent("raise SystemExit('no data found')\n"))
    proc = cli("trace", "--", sys.executable, "broken.py")
    assert proc.returncode == 1
    assert "exited with 1: no data found" in proc.stderr and "Traceback" not in proc.stderr

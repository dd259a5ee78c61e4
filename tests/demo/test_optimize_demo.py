"""`cuda-agent demo`: the shipped recorded sessions, the CUDA kernel's build, and a CPU run."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from demo_repo import suite_env

from cuda_agent_cli import demo
from cuda_agent_cli.doctor import find_nvcc
from cuda_agent_cli.harness.static import check_sources
from cuda_agent_cli.model.replay import load_replay


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_recorded_sessions_match_the_sources_next_to_them(device):
    # Regenerate with `python -m cuda_agent_cli.demo.record` after editing a kernel.
    assert demo.replay_path(device).read_text() == demo.render_replay(device)
    turns = load_replay(demo.replay_path(device))
    names = [c.name for t in turns for c in t.tool_calls]
    assert names[0] == "Read" and names[-3:] == ["Compile", "Verify", "Profile"]
    assert not turns[-1].tool_calls  # the session ends by itself


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_demo_kernels_pass_the_strict_static_checks(device):
    here = demo.demo_dir()
    sources = {f"kernels/{n}": (here / device / n).read_text() for n in demo.KERNELS[device]}
    assert check_sources((here / "model_new.py").read_text(), sources, "strict") == []


@pytest.mark.integration
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
def test_cuda_demo_kernel_compiles_for_sm_90(tmp_path: Path):
    src = demo.demo_dir() / "cuda" / "pooled_layer_norm.cu"
    proc = subprocess.run(
        [
            find_nvcc(),
            "-O3",
            "-std=c++17",
            "-gencode=arch=compute_90,code=sm_90",
            "--compiler-options",
            "-fPIC",
            "-c",
            str(src),
            "-o",
            str(tmp_path / "k.o"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "k.o").stat().st_size > 0


@pytest.mark.integration
def test_cpu_demo_runs_for_real_and_applies_into_its_own_repository(tmp_path: Path, harness_cache_root: Path):
    env = suite_env(api_keys=False)
    env.update(
        XDG_DATA_HOME=str(tmp_path / "data"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_CACHE_HOME=str(harness_cache_root),
    )
    where = tmp_path / "demo"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_agent_cli",
            "demo",
            "--device",
            "cpu",
            "--dir",
            str(where),
            "--batch",
            "--json",
            "--yes",
            "--patch",
            str(tmp_path / "demo.diff"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    print(f"\nCPU demo: {out['timings']}")
    assert out["status"] == "improved" and out["reward"] >= 2 and out["applied"] is True
    assert out["device"] == "cpu" and out["cost_usd"] == 0 and out["turns"] == 7
    assert (tmp_path / "demo.diff").is_file()
    assert '["install"](PooledLayerNorm)' in (where / "vit_head.py").read_text()
    log = subprocess.run(["git", "log", "--format=%s", "--all"], cwd=where, capture_output=True, text=True).stdout
    assert "cuda-agent: PooledLayerNorm runs a verified cpu kernel" in log


def test_demo_refuses_a_folder_that_is_not_empty(tmp_path: Path):
    (tmp_path / "keep.txt").write_text("mine")
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_agent_cli", "demo", "--device", "cpu", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "is not empty" in proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]
    assert shutil.which("git")


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_recorded_sessions_need_no_shell_so_the_demo_runs_without_bubblewrap(device):
    # The demo drops the shell tools on a machine that cannot sandbox them; that is only sound
    # while the recorded sessions call none.
    assert not demo.replay_runs_commands(device)

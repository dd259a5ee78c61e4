"""`cuda-agent verify|profile`: one clear line and the documented exit code for every bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

GOOD_REF = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return a + b


def get_inputs():
    return [torch.randn(32, 64), torch.randn(32, 64)]


def get_init_inputs():
    return []
"""

INLINE_CANDIDATE = '''
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""
#include <torch/extension.h>
torch::Tensor add_forward(torch::Tensor a, torch::Tensor b) {
  auto ac = a.contiguous(); auto bc = b.contiguous();
  auto out = torch::empty_like(ac);
  const float* x = ac.data_ptr<float>(); const float* y = bc.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < ac.numel(); ++i) o[i] = x[i] + y[i];
  return out;
}
"""

ext = load_inline(name="kb_pair_add", cpp_sources=source, functions=["add_forward"])


class ModelNew(nn.Module):
    def forward(self, a, b):
        return ext.add_forward(a, b)
'''


def cli(*args: str, cache: Path) -> subprocess.CompletedProcess:
    import os

    env = dict(os.environ, XDG_CACHE_HOME=str(cache.parent))
    return subprocess.run(
        [sys.executable, "-m", "cuda_agent_cli", *args], capture_output=True, text=True, timeout=900, env=env
    )


def pair(tmp_path: Path, ref: str, cand: str = "class ModelNew:\n    pass\n") -> Path:
    d = tmp_path / "pair"
    d.mkdir()
    (d / "model.py").write_text(ref)
    (d / "model_new.py").write_text(cand)
    return d


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


@pytest.mark.parametrize("command", ["verify", "profile"])
def test_no_such_path_is_exit_2(tmp_path: Path, harness_cache: Path, command: str) -> None:
    proc = cli(command, str(tmp_path / "missing"), cache=harness_cache)
    assert proc.returncode == 2
    assert "does not exist" in one_error_line(proc)


def test_reference_without_model_class_is_exit_2(tmp_path: Path, harness_cache: Path) -> None:
    d = pair(tmp_path, "import torch\ndef get_inputs():\n    return [torch.randn(2)]\n")
    proc = cli("verify", str(d), cache=harness_cache)
    assert proc.returncode == 2 and "defines no class Model" in one_error_line(proc)


def test_reference_without_get_inputs_is_exit_2(tmp_path: Path, harness_cache: Path) -> None:
    d = pair(tmp_path, "import torch\nclass Model(torch.nn.Module):\n    pass\n")
    proc = cli("profile", "--ref", str(d / "model.py"), "--candidate", str(d / "model_new.py"), cache=harness_cache)
    assert proc.returncode == 2 and "defines no get_inputs()" in one_error_line(proc)


def test_ref_without_candidate_is_exit_2(tmp_path: Path, harness_cache: Path) -> None:
    d = pair(tmp_path, GOOD_REF)
    proc = cli("verify", "--ref", str(d / "model.py"), cache=harness_cache)
    assert proc.returncode == 2 and "--ref and --candidate go together" in one_error_line(proc)


def test_cuda_without_a_gpu_is_exit_3(tmp_path: Path, harness_cache: Path) -> None:
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    d = pair(tmp_path, GOOD_REF)
    proc = cli("verify", str(d), "--device", "cuda", cache=harness_cache)
    assert proc.returncode == 3 and "no CUDA GPU" in one_error_line(proc)


@pytest.mark.integration
def test_kernelbench_pair_with_load_inline_on_cpu(tmp_path: Path, harness_cache: Path) -> None:
    d = pair(tmp_path, GOOD_REF, INLINE_CANDIDATE)
    proc = cli("verify", str(d), "--device", "cpu", "--json", cache=harness_cache)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    checks = {c["name"]: c for c in data["checks"]}
    assert data["correct"] and checks["compile"]["passed"] and checks["extension_kernel"]["passed"]
    assert sorted(p.name for p in d.iterdir()) == ["model.py", "model_new.py"]  # nothing written inside PATH


@pytest.mark.integration
def test_profile_repeat_reports_the_median_and_range_of_independent_profiles(
    tmp_path: Path, harness_cache: Path
) -> None:
    d = pair(tmp_path, GOOD_REF, INLINE_CANDIDATE)
    proc = cli("profile", str(d), "--device", "cpu", "--repeat", "2", "--trials", "10", "--json", cache=harness_cache)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    repeat = data["repeat"]
    assert repeat["n"] == 2 and len(repeat["rewards"]) == 2
    spread = repeat["speedup_vs_eager"]
    assert len(spread["values"]) == 2 and spread["min"] <= spread["median"] <= spread["max"]
    lo, hi = data["timings"]["speedup_vs_eager_interval"]
    assert lo <= data["timings"]["speedup_vs_eager"] <= hi and isinstance(data["timings"]["uncertain"], bool)
    # Without --json the same figures, in words.
    text = cli("profile", str(d), "--device", "cpu", "--repeat", "2", "--trials", "10", cache=harness_cache)
    assert "over 2 profiles (median, range)" in text.stdout and "95% interval" in text.stdout


def test_profile_repeat_of_zero_is_exit_2(tmp_path: Path, harness_cache: Path) -> None:
    proc = cli("profile", str(tmp_path), "--repeat", "0", cache=harness_cache)
    assert proc.returncode == 2

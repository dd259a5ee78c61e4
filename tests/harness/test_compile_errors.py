"""A failed build reaches the result with the compiler's own first errors (file:line), not with
the start of ninja's command lines, for a single-file load_inline candidate as for a workspace."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from demo_repo import suite_env

pytestmark = pytest.mark.integration

REFERENCE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return []
"""

BROKEN = '''
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#include <torch/extension.h>

torch::Tensor relu_broken(torch::Tensor x) {
  auto out = torch::empty_like(x);
  return undefined_helper(out);
}
"""
ext = load_inline("relu_broken_build", cpp_sources=SOURCE, functions=["relu_broken"],
                  extra_cflags=["-O2", "-DA_LONG_COMMAND_LINE_ONE", "-DA_LONG_COMMAND_LINE_TWO"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_broken(x)
'''


def test_a_failed_inline_build_reports_the_compilers_first_error(tmp_path: Path, harness_cache_root: Path):
    pair = tmp_path / "pair"
    pair.mkdir()
    (pair / "model.py").write_text(REFERENCE)
    (pair / "model_new.py").write_text(BROKEN)
    env = suite_env()
    env.update(XDG_CACHE_HOME=str(harness_cache_root), XDG_DATA_HOME=str(tmp_path / "data"))
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_agent_cli", "verify", str(pair), "--device", "cpu", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    result = json.loads(proc.stdout)
    (compile_check,) = [c for c in result["checks"] if c["name"] == "compile"]
    assert not compile_check["passed"]
    first = compile_check["detail"].splitlines()[0]
    assert "error:" in first and "undefined_helper" in first and ".cpp:" in first, compile_check["detail"][:600]


def test_an_inline_folder_that_cannot_hold_builds_is_one_line_and_exit_2(tmp_path: Path):
    pair = tmp_path / "pair"
    pair.mkdir()
    (pair / "model.py").write_text(REFERENCE)
    (pair / "model_new.py").write_text(BROKEN)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    env = suite_env()
    env.update(
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        CUDA_AGENT_INLINE_DIR=str(blocker / "inline"),
    )
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_agent_cli", "verify", str(pair), "--device", "cpu"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines() == [
        f"error: CUDA_AGENT_INLINE_DIR={blocker / 'inline'} cannot hold builds (Not a directory) — "
        "point it at a folder you can write, or unset it"
    ]

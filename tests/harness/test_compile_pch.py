"""The precompiled torch/extension.h: searched first on every C++ object's include path, used
where it fits, and read past where it does not (the build still works)."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest

from cuda_agent_cli import resources
from cuda_agent_cli.harness import Harness
from cuda_agent_cli.workspace import create_workspace

sys.path.insert(0, str(resources.tools_dir()))
import compile_kernels  # noqa: E402

REFERENCE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return []
"""

CANDIDATE = """
import torch.nn as nn
import cuda_extension


class ModelNew(nn.Module):
    def forward(self, x):
        return cuda_extension.relu_twice(x)
"""

KERNEL = r"""
#include <torch/extension.h>
#include "../binding_registry.h"

torch::Tensor relu_twice(torch::Tensor x) {
  auto xc = x.contiguous();
  auto out = torch::empty_like(xc);
  const float* px = xc.data_ptr<float>();
  float* po = out.data_ptr<float>();
  for (int64_t i = 0; i < xc.numel(); ++i) po[i] = px[i] > 0.f ? 2.f * px[i] : 0.f;
  return out;
}

static void register_relu_twice(pybind11::module& m) { m.def("relu_twice", &relu_twice); }
REGISTER_BINDING(relu_twice, register_relu_twice);
"""


def test_the_precompiled_header_is_searched_before_torchs_own(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "kernels").mkdir(parents=True)
    (src / "binding.cpp").write_text("")
    (src / "kernels" / "k.cpp").write_text("")
    folder = tmp_path / "pch" / "abc"
    path, _ = compile_kernels.write_build_file(tmp_path, src, "cpu", None, None, folder)
    text = path.read_text()
    assert f"pch_include = -I{folder}" in text
    command = next(line for line in text.splitlines() if line.strip().startswith("command = $cxx -MMD"))
    assert command.index("$pch_include") < command.index("$cflags")
    # without one, nothing is added, and an object's stored name does not depend on it
    (tmp_path / "plain").mkdir()
    plain, _ = compile_kernels.write_build_file(tmp_path / "plain", src, "cpu", None, None, None)
    assert "pch_include = \n" in plain.read_text()


@pytest.mark.integration
def test_a_binding_builds_with_the_precompiled_header_and_is_correct(
    tmp_path: Path, harness_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the run's shared one (tests/conftest.py), or one made here when this test runs alone
    shared = Path(os.environ.get("CUDA_AGENT_PCH_DIR") or tmp_path / "pch")
    folder = compile_kernels.pch_folder(shared / "cpu", compile_kernels.cxx_flags("cpu"))
    if not compile_kernels.pch_file(folder).is_file():
        assert compile_kernels.run_pch_job({"device": "cpu", "pch_dir": str(shared / "cpu")})["ok"]
    monkeypatch.setenv("XDG_CACHE_HOME", str(harness_cache.parent))
    monkeypatch.setenv("CUDA_AGENT_PCH_DIR", str(shared))
    # a source of its own: an object the suite's build store keeps from an earlier run is linked, not compiled
    unique = f"// {uuid.uuid4()}\n"
    ws = create_workspace(tmp_path / "ws", REFERENCE, CANDIDATE, {"relu_twice.cpp": unique + KERNEL})
    harness = Harness(ws, device="cpu")
    result = harness.verify()
    assert result.correct, result.summary()
    assert harness.last_compile is not None and harness.last_compile.get("pch") == "used"


@pytest.mark.integration
def test_a_precompiled_header_that_does_not_fit_is_read_past(
    tmp_path: Path, harness_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "pch"
    folder = compile_kernels.pch_folder(shared / "cpu", compile_kernels.cxx_flags("cpu"))
    compile_kernels.pch_file(folder).parent.mkdir(parents=True)
    compile_kernels.pch_file(folder).write_bytes(b"left by another compiler" * 64)
    monkeypatch.setenv("XDG_CACHE_HOME", str(harness_cache.parent))
    monkeypatch.setenv("CUDA_AGENT_PCH_DIR", str(shared))
    ws = create_workspace(
        tmp_path / "ws",
        REFERENCE,
        CANDIDATE.replace("relu_twice(x)", "relu_twice(x) "),
        {
            # a source no earlier test (or run) built
            "relu_twice.cpp": f"// {uuid.uuid4()}\n" + KERNEL.replace("2.f * px[i]", "px[i] * 2.f")
        },
    )
    harness = Harness(ws, device="cpu")
    result = harness.verify()
    assert result.correct, result.summary()
    assert harness.last_compile is not None and harness.last_compile.get("pch") == "used"

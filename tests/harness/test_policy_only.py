"""A candidate that only the strict policy refuses says so: a bench report tells it from a wrong one."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent_cli.harness.verdict import POLICY_ONLY

pytestmark = pytest.mark.integration

REFERENCE = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) + 1.0


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return []
"""

# A kernel for the add, torch's relu beside it: hybrid judges it, strict refuses it.
HYBRID = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""
torch::Tensor add_one(torch::Tensor x) {
  auto xc = x.contiguous();
  auto out = torch::empty_like(xc);
  const float* in = xc.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] + 1.f;
  return out;
}
"""

ext = load_inline(name="policy_only_add_one", cpp_sources=source, functions=["add_one"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.add_one(torch.relu(x))
'''

# Reading the environment is refused under every policy.
FORBIDDEN = HYBRID.replace("class ModelNew", "import os\nSECRET = os.environ.get('HOME')\n\n\nclass ModelNew")


def _pair(tmp_path: Path, candidate: str) -> tuple[Path, Path]:
    ref, cand = tmp_path / "model.py", tmp_path / "model_new.py"
    ref.write_text(REFERENCE)
    cand.write_text(candidate)
    return ref, cand


def test_a_candidate_refused_only_by_strict_says_it_would_be_judged_under_hybrid(
    tmp_path: Path, harness_cache: Path
) -> None:
    from cuda_agent_cli.harness import verify_path

    ref, cand = _pair(tmp_path, HYBRID)
    result = verify_path(ref=ref, candidate=cand, device="cpu", policy="strict")
    assert not result.correct and result.errors[0] == POLICY_ONLY, result.summary()
    assert POLICY_ONLY in result.check("static").detail  # type: ignore[union-attr]


def test_a_candidate_refused_under_every_policy_is_not_called_a_policy_reject(
    tmp_path: Path, harness_cache: Path
) -> None:
    from cuda_agent_cli.harness import verify_path

    ref, cand = _pair(tmp_path, FORBIDDEN)
    result = verify_path(ref=ref, candidate=cand, device="cpu", policy="strict")
    assert not result.correct and POLICY_ONLY not in result.errors, result.summary()

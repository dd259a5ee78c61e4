"""Constructor arguments that are objects of the user's code (config dataclasses, namedtuples,
enums, namespaces) reach every process of the harness: the real objects where the reference is
built, stand-ins with the same fields and property values in the candidate's process."""

from __future__ import annotations

import dataclasses
import enum
import io
import json
import subprocess
import sys
from collections import namedtuple
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from demo_repo import suite_env

from cuda_agent_cli.resources import tools_dir

sys.path.insert(0, str(tools_dir()))
import init_objects  # noqa: E402  (a locked job module, imported from the packaged tools/)


class Act(enum.Enum):
    RELU = "relu"
    GELU = "gelu"


@dataclasses.dataclass(frozen=True)
class Cfg:
    dim: int = 64
    hidden: int = 128
    act: Act = Act.GELU

    @property
    def ratio(self) -> float:
        return self.hidden / self.dim


Pair = namedtuple("Pair", ["a", "b"])


def test_stand_ins_keep_fields_properties_and_kinds():
    init = [Cfg(), Pair(1, 2.5), SimpleNamespace(eps=1e-5, names=["x", "y"]), Act.RELU, torch.float16, 3, (4, 5)]
    assert init_objects.has_objects(init) and not init_objects.has_objects([1, (2.0, "a"), torch.ones(2), None])
    carried = init_objects.portable(init)
    # what the set file carries loads with weights_only
    buffer = io.BytesIO()
    torch.save({"init": carried}, buffer)
    buffer.seek(0)
    back = init_objects.standins(torch.load(buffer, weights_only=True)["init"])
    cfg, pair, ns, act, dtype, three, four_five = back
    assert (cfg.dim, cfg.hidden, cfg.ratio, cfg.act.value) == (64, 128, 2.0, "gelu")
    assert type(cfg).__name__ == "Cfg" and dataclasses.is_dataclass(cfg)
    assert pair.a == 1 and pair[1] == 2.5 and pair._fields == ("a", "b")
    assert ns.eps == 1e-5 and ns.names == ["x", "y"]
    assert act.name == "RELU" and act.value == "relu"
    assert dtype is torch.float16 and three == 3 and four_five == (4, 5)


def test_an_object_that_cannot_be_carried_is_named():
    with pytest.raises(TypeError, match="lock"):
        init_objects.portable([__import__("threading").Lock()])


REFERENCE = """
import dataclasses
import enum
from collections import namedtuple

import torch
from torch import nn


class Act(enum.Enum):
    RELU = "relu"
    TANH = "tanh"


@dataclasses.dataclass
class Cfg:
    dim: int
    scale: float
    act: Act

    @property
    def width(self):
        return self.dim


Extra = namedtuple("Extra", ["shift"])


class Model(nn.Module):
    def __init__(self, cfg, extra):
        super().__init__()
        self.lin = nn.Linear(cfg.width, cfg.dim)
        self.scale, self.shift = cfg.scale, extra.shift
        self.tanh = cfg.act is Act.TANH

    def forward(self, x):
        y = self.lin(x)
        y = torch.tanh(y) if self.tanh else torch.relu(y)
        return y * self.scale + self.shift


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return [Cfg(32, 2.0, Act.RELU), Extra(0.5)]
"""

CANDIDATE = """
import torch
from torch import nn
from torch.utils.cpp_extension import load_inline

SOURCE = '''
#include <torch/extension.h>
torch::Tensor relu_affine(torch::Tensor y, double scale, double shift) {
  auto out = torch::empty_like(y);
  const float* a = y.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < y.numel(); ++i) o[i] = (a[i] > 0 ? a[i] : 0.0f) * scale + shift;
  return out;
}
'''
ext = load_inline("init_objects_relu_affine", cpp_sources=SOURCE, functions=["relu_affine"])


class ModelNew(nn.Module):
    def __init__(self, cfg, extra):
        super().__init__()
        self.lin = nn.Linear(cfg.width, cfg.dim)
        self.scale, self.shift = cfg.scale, extra.shift
        assert cfg.act.value == "relu"

    def forward(self, x):
        return ext.relu_affine(self.lin(x), self.scale, self.shift)
"""


@pytest.mark.integration
def test_verify_and_profile_a_pair_built_from_config_objects(tmp_path: Path, harness_cache_root: Path):
    pair = tmp_path / "pair"
    pair.mkdir()
    (pair / "model.py").write_text(REFERENCE)
    (pair / "model_new.py").write_text(CANDIDATE)
    env = suite_env() | {
        "XDG_CACHE_HOME": str(harness_cache_root),
        "XDG_DATA_HOME": str(tmp_path / "data"),
    }
    for command in ("verify", "profile"):
        out = subprocess.run(
            [sys.executable, "-m", "cuda_agent_cli", command, str(pair), "--device", "cpu", "--policy", "hybrid"]
            + ["--json"]
            + (["--trials", "20"] if command == "profile" else []),
            capture_output=True,
            text=True,
            env=env,
            timeout=900,
        )
        result = json.loads(out.stdout)
        assert result["correct"], (command, [c for c in result["checks"] if not c["passed"]], out.stderr[-2000:])
    assert result["timings"]["eager_us"] > 0

"""The integrated loader runs the kernel only on instances constructed as the verified one was:
the kernel's module is built from the verified constructor arguments, so an instance made with
another scale, eps or config keeps its original forward (no compiler needed: the extension's
class is a stand-in that adds 1000)."""

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from cuda_agent_cli.kernel_files import KernelFiles
from cuda_agent_cli.task.inputs import parse_inputs_spec, with_module
from cuda_agent_cli.writeback.apply import apply_plan, build_plan
from cuda_agent_cli.writeback.integrate import IntegrationSpec, Verified

CONFIG = """from dataclasses import dataclass


@dataclass
class Cfg:
    dim: int = 8
    gain: float = 2.0
"""

MODULE = """import torch

from pkg.config import Cfg


class Gain(torch.nn.Module):
    def __init__(self, cfg, eps=1e-5, *, dtype=torch.float32):
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(0.5, 1.5, cfg.dim, dtype=dtype))
        self.gain = cfg.gain
        self.eps = eps

    def forward(self, x):
        return x * self.w * self.gain + self.eps
"""

MODEL_NEW = """import torch
import cuda_extension


class ModelNew(torch.nn.Module):
    def __init__(self, cfg, eps=1e-5, *, dtype=torch.float32):
        super().__init__()
        self.w = torch.nn.Parameter(torch.empty(cfg.dim, dtype=dtype))
        self.gain = cfg.gain

    def forward(self, x):
        return x * self.w * self.gain + 1000.0
"""


def git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True, capture_output=True
    )


def integrate(
    root: Path,
    package: str,
    files: dict[str, str],
    module: str,
    cls: str,
    class_end: int,
    model_new: str,
    spec,
    monkeypatch: pytest.MonkeyPatch,
):
    """A repository with `files` under `package`, the kernel for `package.module::cls` applied
    (verified for `spec`, on the CPU), the module imported with the stand-in extension class."""
    (root / package).mkdir(parents=True)
    (root / package / "__init__.py").write_text("")
    for name, text in files.items():
        (root / package / name).write_text(text)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "start")
    plan = build_plan(
        IntegrationSpec(
            module_file=root / package / f"{module}.py",
            module_source=files[f"{module}.py"],
            class_name=cls,
            class_snake=module,
            class_end=class_end,
            display=f"{package}/{module}.py::{cls}",
            session_id="s1",
            candidate=KernelFiles.of({"model_new.py": model_new, f"kernels/{module}.cpp": "// kernel\n"}),
            binding_files={"binding.cpp": "", "binding_registry.h": ""},
            verified=Verified(
                device="cpu",
                call=spec,
                forward_params=("x",),
                parameters=(("w", "float32", (8,)),),
                training_sensitive=False,
            ),
        ),
        manifest_entry={"target": f"{package}/{module}.py::{cls}"},
        fallback_root=root,
    )
    apply_plan(plan, commit=False, allow_dirty=False)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.delenv("CUDA_AGENT_DISABLE_KERNELS", raising=False)
    names = [package] + [f"{package}.{n[:-3]}" for n in files]
    for name in names:
        sys.modules.pop(name, None)
    imported = importlib.import_module(f"{package}.{module}")
    namespace: dict = {}
    exec(compile(model_new.replace("import cuda_extension\n", ""), "model_new", "exec"), namespace)
    monkeypatch.setitem(getattr(imported, cls).forward.__globals__, "_load_new_class", lambda: namespace["ModelNew"])
    return imported, names


@pytest.fixture
def gain_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    spec = parse_inputs_spec("x=float32[4,8]; init: Cfg(dim=8, gain=2.0), dtype=torch.float32")
    spec = type(spec)(spec.args, tuple(type(a)(a.name, with_module(a.value, "pkg.gain")) for a in spec.init))
    module, names = integrate(
        tmp_path / "repo",
        "pkg",
        {"config.py": CONFIG, "gain.py": MODULE},
        "gain",
        "Gain",
        14,
        MODEL_NEW,
        spec,
        monkeypatch,
    )
    yield module, importlib.import_module("pkg.config")
    for name in names:
        sys.modules.pop(name, None)


def test_an_instance_built_as_verified_runs_the_kernel(gain_module):
    module, config = gain_module
    x = torch.randn(4, 8)
    with torch.no_grad():
        for m in (
            module.Gain(config.Cfg()),
            module.Gain(config.Cfg(8, 2.0), 1e-5),
            module.Gain(cfg=config.Cfg(dim=8), dtype=torch.float32),
        ):
            assert torch.allclose(m(x), x * m.w * 2.0 + 1000.0)


@pytest.mark.parametrize("how", ["another gain in the config", "another eps", "another dtype keyword"])
def test_an_instance_built_otherwise_keeps_its_original_forward(gain_module, how: str):
    module, config = gain_module
    m = {
        "another gain in the config": lambda: module.Gain(config.Cfg(dim=8, gain=3.0)),
        "another eps": lambda: module.Gain(config.Cfg(), eps=0.5),
        "another dtype keyword": lambda: module.Gain(config.Cfg(), dtype=torch.float64),
    }[how]()
    x = torch.randn(4, 8, dtype=m.w.dtype)
    with torch.no_grad():
        assert torch.allclose(m(x), x * m.w * m.gain + m.eps)  # the original, not the kernel's +1000


PLAIN = """import torch


class Scale(torch.nn.Module):
    def __init__(self, dim, gain=2.0):
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(0.5, 1.5, dim))
        self.gain = gain

    def forward(self, x):
        return x * self.w * self.gain
"""

PLAIN_NEW = """import torch
import cuda_extension


class ModelNew(torch.nn.Module):
    def __init__(self, dim, gain=2.0):
        super().__init__()
        self.w = torch.nn.Parameter(torch.empty(dim))
        self.gain = gain

    def forward(self, x):
        return x * self.w * self.gain + 1000.0
"""


def test_a_plain_number_given_to_the_constructor_is_checked_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    module, names = integrate(
        tmp_path / "repo",
        "lib",
        {"scale.py": PLAIN},
        "scale",
        "Scale",
        11,
        PLAIN_NEW,
        parse_inputs_spec("x=float32[4,8]; init: 8"),
        monkeypatch,
    )
    x = torch.randn(4, 8)
    with torch.no_grad():
        verified_like = module.Scale(8, gain=2.0)  # the default, spelled out
        assert torch.allclose(verified_like(x), x * verified_like.w * 2.0 + 1000.0)
        other = module.Scale(8, gain=5.0)  # same parameters, another gain: the kernel would be wrong
        assert torch.allclose(other(x), x * other.w * 5.0)
    for name in names:
        sys.modules.pop(name, None)

"""Glob (newest first) and Grep, with ripgrep and with the forced pure-Python fallback."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from cuda_agent_cli.actions import ActionContext, Toolbox
from cuda_agent_cli.actions.search import Glob, Grep
from cuda_agent_cli.sandbox import Sandbox, SandboxPolicy, SandboxStatus

HAVE_RG = shutil.which("rg") is not None


def _ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    files = {
        "model.py": "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n",
        "model_new.py": "import cuda_extension\nclass ModelNew:\n    def forward(self, x):\n        return cuda_extension.relu(x)\n",
        "kernels/relu.cu": "// relu\n#include <cuda.h>\n__global__ void relu_kernel(float* x, int n) {\n  int i = threadIdx.x;\n  if (i < n) x[i] = fmaxf(x[i], 0.f);\n}\nvoid launch() {}\n",
        "kernels/relu_binding.cpp": '#include "../binding_registry.h"\n// RELU binding\nvoid register_relu() {}\n',
        "kernels/sub-x.cu": "__global__ void other() {}\n",
        "kernels/sub/deep.cu": "__global__ void deep() {}\n",
        "notes/readme.md": "Relu kernels live in kernels/.\n",
        ".git/config": "__global__ should not be searched\n",
    }
    for rel, text in files.items():
        p = ws / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (ws / "kernels" / "blob.o").write_bytes(b"\x00\x01__global__\x00")
    return ws


def _toolbox(tmp_path: Path, use_rg: bool) -> Toolbox:
    ws = _ws(tmp_path)
    pol = SandboxPolicy.optimize(ws, [], sandbox_uid=None, sandbox_gid=None)
    sb = Sandbox(pol, SandboxStatus(False, "unit tests"), enabled=False)
    grep = Grep()
    grep.use_ripgrep = use_rg
    return Toolbox([Glob(), grep], ActionContext(sb))


ENGINES = [pytest.param(False, id="python")] + ([pytest.param(True, id="ripgrep")] if HAVE_RG else [])

# (arguments, expected output) — the same for both engines
CASES = [
    ({"pattern": "__global__"}, "Found 3 files\nkernels/relu.cu\nkernels/sub/deep.cu\nkernels/sub-x.cu"),
    (
        {"pattern": "relu", "-i": True, "output_mode": "count"},
        "kernels/relu.cu:2\nkernels/relu_binding.cpp:2\nmodel.py:1\nmodel_new.py:1\nnotes/readme.md:1",
    ),
    ({"pattern": "threadIdx", "output_mode": "content"}, "kernels/relu.cu:4:  int i = threadIdx.x;"),
    ({"pattern": "threadIdx", "output_mode": "content", "-n": False}, "kernels/relu.cu:  int i = threadIdx.x;"),
    (
        {"pattern": "forward", "output_mode": "content", "-B": 1, "glob": "*.py"},
        "model.py-2-class Model(torch.nn.Module):\nmodel.py:3:    def forward(self, x):\n--\n"
        "model_new.py-2-class ModelNew:\nmodel_new.py:3:    def forward(self, x):",
    ),
    (
        {"pattern": "int i", "output_mode": "content", "-C": 1, "path": "kernels"},
        "kernels/relu.cu-3-__global__ void relu_kernel(float* x, int n) {\nkernels/relu.cu:4:  int i = threadIdx.x;\n"
        "kernels/relu.cu-5-  if (i < n) x[i] = fmaxf(x[i], 0.f);",
    ),
    ({"pattern": "include", "type": "cpp"}, "Found 1 file\nkernels/relu_binding.cpp"),
    (
        {"pattern": "void", "glob": "*.{cu,cpp}", "output_mode": "count", "head_limit": 2},
        "kernels/relu.cu:2\nkernels/relu_binding.cpp:1\n[2 more lines not shown (head_limit=2)]",
    ),
    (
        {"pattern": r"relu_kernel\(float\* x,\s+int n\) \{\n\s+int i", "multiline": True, "output_mode": "content"},
        "kernels/relu.cu:3:__global__ void relu_kernel(float* x, int n) {\nkernels/relu.cu:4:  int i = threadIdx.x;",
    ),
    ({"pattern": "forward", "path": "model.py", "output_mode": "content"}, "model.py:3:    def forward(self, x):"),
    ({"pattern": "no such text anywhere"}, "No matches found"),
]


@pytest.mark.parametrize("use_rg", ENGINES)
@pytest.mark.parametrize("args,expected", CASES, ids=[str(i) for i in range(len(CASES))])
def test_grep_output_modes(tmp_path: Path, use_rg: bool, args: dict, expected: str) -> None:
    r = _toolbox(tmp_path, use_rg).call("Grep", args)
    assert not r.is_error, r.output
    assert r.output == expected
    if expected != "No matches found":
        assert r.data["engine"] == ("ripgrep" if use_rg else "python")


@pytest.mark.parametrize("use_rg", ENGINES)
def test_grep_errors(tmp_path: Path, use_rg: bool) -> None:
    tb = _toolbox(tmp_path, use_rg)
    bad = tb.call("Grep", {"pattern": "relu(("})
    assert bad.is_error
    assert tb.call("Grep", {"pattern": "x", "path": "nope"}).is_error
    broad = tb.call("Grep", {"pattern": "PRIVATE KEY", "path": "/"})
    assert broad.is_error and "too broad" in broad.output
    assert tb.call("Grep", {"pattern": "x", "path": "/root"}).is_error


def test_glob_lists_newest_first(tmp_path: Path) -> None:
    tb = _toolbox(tmp_path, False)
    ws = tb.ctx.root
    for i, rel in enumerate(["kernels/sub/deep.cu", "kernels/relu.cu", "kernels/sub-x.cu"]):
        os.utime(ws / rel, (1_000_000 + i, 1_000_000 + i))
    r = tb.call("Glob", {"pattern": "**/*.cu"})
    assert r.output.splitlines() == ["kernels/sub-x.cu", "kernels/relu.cu", "kernels/sub/deep.cu"]
    r = tb.call("Glob", {"pattern": "*.cu", "path": "kernels/sub"})
    assert r.output == "kernels/sub/deep.cu"
    assert tb.call("Glob", {"pattern": "*.rs"}).output == "No files found"
    assert ".git" not in tb.call("Glob", {"pattern": "**/*"}).output


def test_glob_caps_and_refuses(tmp_path: Path) -> None:
    tb = _toolbox(tmp_path, False)
    many = tb.ctx.root / "scratch" / "many"
    many.mkdir(parents=True)
    for i in range(130):
        (many / f"f{i}.txt").write_text("")
    r = tb.call("Glob", {"pattern": "scratch/many/*.txt"})
    assert len(r.output.splitlines()) == 101 and "30 more files" in r.output
    assert tb.call("Glob", {"pattern": "/etc/*"}).is_error
    assert tb.call("Glob", {"pattern": "*", "path": "/"}).is_error


def test_search_skips_links_out_of_the_workspace_and_pipes(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.cu").write_text("__global__ void secret() {}\n")
    tb = _toolbox(tmp_path, False)
    os.symlink(outside, tb.ctx.root / "kernels" / "linked")
    os.symlink(outside / "secret.cu", tb.ctx.root / "kernels" / "secret_link.cu")
    os.mkfifo(tb.ctx.root / "kernels" / "fifo.cu")
    globbed = tb.call("Glob", {"pattern": "kernels/**/*.cu"}).output
    assert "secret" not in globbed and "relu.cu" in globbed
    grepped = tb.call("Grep", {"pattern": "secret"})
    assert grepped.output == "No matches found"

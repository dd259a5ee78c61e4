"""The static checker: what it rejects, what it must leave alone, and under which policy."""

from __future__ import annotations

import textwrap

import pytest

from cuda_agent_cli.harness.static import (
    Finding,
    check_cpp,
    check_sources,
    strip_cpp_comments_and_strings,
)

HEADER = "import torch\nimport torch.nn as nn\nimport cuda_extension\n\n"


def _model(forward_body: str, extra: str = "", init_body: str = "pass") -> str:
    return (
        HEADER
        + extra
        + textwrap.dedent(f"""
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                {init_body}

            def forward(self, x):
                {forward_body}
        """)
    )


def names(source: str, cpp: dict[str, str] | None = None, policy: str = "strict") -> set[str]:
    return {f.name for f in check_sources(source, cpp or {}, policy) if f.severity == "error"}


HONEST_FORWARD = _model(
    "out = torch.empty_like(x)\n                cuda_extension.relu(x.contiguous(), out)\n"
    "                return out.view(x.shape)"
)


def test_honest_candidate_has_no_findings():
    assert check_sources(HONEST_FORWARD, {}, "strict") == []


def test_findings_are_frozen_and_carry_location_and_reason():
    findings = check_sources(_model("return torch.relu(x)"), {}, "strict")
    assert len(findings) == 1
    f = findings[0]
    assert isinstance(f, Finding) and f.name == "torch_ops_python" and f.severity == "error"
    assert f.location.startswith("model_new.py:") and "torch.relu" in f.reason
    with pytest.raises(Exception):
        f.name = "other"  # type: ignore[misc]


def test_unknown_policy_is_refused():
    with pytest.raises(ValueError):
        check_sources(HONEST_FORWARD, {}, "lenient")


@pytest.mark.parametrize(
    "source, expected",
    [
        # try/except fallback (threat 13)
        (
            _model(
                "try:\n                    return cuda_extension.relu(x)\n                except Exception:\n"
                "                    return torch.relu(x)"
            ),
            "try_fallback",
        ),
        (
            _model(
                "with contextlib.suppress(RuntimeError):\n                    return cuda_extension.relu(x)\n"
                "                return x",
                extra="import contextlib\n",
            ),
            "try_fallback",
        ),
        # reference use
        ("from model import Model\nclass ModelNew(Model):\n    pass\n", "reference_use"),
        ("import model as m\nclass ModelNew(m.Model):\n    pass\n", "reference_use"),
        (_model("return self.ref(x)", init_body="import model; self.ref = model.Model()"), "reference_use"),
        # dynamic code (threat 16)
        (_model("return eval('torch.' + 'relu')(x)"), "dynamic_code"),
        (_model("exec(code)\n                return x", extra="code = 'x = 1'\n"), "dynamic_code"),
        (_model("return getattr(torch, name)(x)", extra="name = 're' + 'lu'\n"), "dynamic_code"),
        (_model("return __import__('torch').relu(x)"), "dynamic_code"),
        (_model("return importlib.import_module('torch').relu(x)", extra="import importlib\n"), "dynamic_code"),
        (_model("return globals()['torch'].relu(x)"), "dynamic_code"),
        (
            "import torch\ntorch.allclose = lambda *a, **k: True\nclass ModelNew(torch.nn.Module):\n    pass\n",
            "dynamic_code",
        ),
        ("import time\ntime.perf_counter = lambda: 0.0\n", "dynamic_code"),
        ("import sys\nsys.modules['model'].Model.forward = lambda self, x: x\n", "dynamic_code"),
        (_model("return x", extra="from torch import *\n"), "dynamic_code"),
        (_model("torch.utils._python_dispatch._disable_current_modes()\n                return x"), "dynamic_code"),
        # threads and processes (threat 1)
        (
            _model(
                "threading.Thread(target=cuda_extension.relu, args=(x,)).start()\n                return x",
                extra="import threading\n",
            ),
            "threads",
        ),
        (_model("return x", extra="from concurrent.futures import ThreadPoolExecutor\n"), "threads"),
        (_model("os.fork()\n                return x", extra="import os\n"), "threads"),
        (_model("subprocess.run(['true'])\n                return x", extra="import subprocess\n"), "threads"),
        # streams without sync
        (
            _model(
                "s = torch.cuda.Stream()\n                with torch.cuda.stream(s):\n"
                "                    out = cuda_extension.relu(x)\n                return out"
            ),
            "streams",
        ),
        # file / env / argv access
        (_model("return x", extra="import os\nMODE = os.environ.get('CUDA_AGENT_PHASE')\n"), "file_env_access"),
        (_model("return x", extra="from os import environ\nMODE = environ['X']\n"), "file_env_access"),
        (_model("open('/tmp/cache.txt', 'w').write('1')\n                return x"), "file_env_access"),
        (_model("return torch.load('/tmp/answer.pt')"), "file_env_access"),
        (_model("return x", extra="import sys\nTIMING = 'profile' in sys.argv\n"), "file_env_access"),
        (_model("return x", extra="import pathlib\nTEXT = pathlib.Path('model.py').read_text()\n"), "file_env_access"),
        # precision downgrade (threat 11)
        (_model("return x", extra="torch.backends.cuda.matmul.allow_tf32 = True\n"), "precision_flags"),
        (_model("return x", extra="torch.set_float32_matmul_precision('medium')\n"), "precision_flags"),
        (
            _model("return x", extra="torch.backends.cudnn.flags(enabled=True, allow_tf32=True).__enter__()\n"),
            "precision_flags",
        ),
        # torch ops in forward (threat 14), through every kind of alias
        (_model("return F.relu(x)", extra="import torch.nn.functional as F\n"), "torch_ops_python"),
        (_model("return r(x)", extra="from torch import relu as r\n"), "torch_ops_python"),
        (_model("return T.matmul(x, x)", extra="T = torch\n"), "torch_ops_python"),
        (_model("return mm(x, x)", extra="mm = torch.matmul\n"), "torch_ops_python"),
        (_model("return getattr(torch, 'tanh')(x)"), "torch_ops_python"),
        (_model("return x.sum(dim=1)"), "torch_ops_python"),
        (_model("return torch.ops.aten.relu.default(x)"), "torch_ops_python"),
        (
            _model("return self.helper(x)\n\n            def helper(self, x):\n                return x.softmax(-1)"),
            "torch_ops_python",
        ),
        (_model("return torch.compile(lambda t: t * 2)(x)"), "torch_ops_python"),
    ],
)
def test_rejected_python(source, expected):
    assert expected in names(source)


@pytest.mark.parametrize(
    "source",
    [
        # banned words in strings and comments are text, not code
        _model(
            "msg = 'torch.relu(x) would be cheating; exec eval open'\n                # torch.matmul(x, x)\n"
            "                return cuda_extension.relu(x)"
        ),
        # __init__ may use torch freely to build parameters
        _model(
            "return cuda_extension.linear(x, self.w, self.b)",
            init_body="self.w = nn.Parameter(torch.randn(4, 4).mul(0.1)); self.b = nn.Parameter(torch.zeros(4))",
        ),
        # views, sizes, allocation, dtype queries and custom-op namespaces are allowed
        _model(
            "n, c = x.size(0), x.shape[1]\n                out = x.new_empty((n, c))\n"
            "                torch.ops.my_kernels.fill(out, x.reshape(n, c).contiguous())\n"
            "                return out.view(n, c).to(torch.float32)"
        ),
        # os.path is pure string work
        _model("return cuda_extension.relu(x)", extra="import os\nHERE = os.path.dirname(os.path.abspath(__file__))\n"),
        # a stream with a synchronize is honest
        _model(
            "s = torch.cuda.Stream()\n                with torch.cuda.stream(s):\n"
            "                    out = cuda_extension.relu(x)\n                torch.cuda.synchronize()\n"
            "                return out"
        ),
        # try/finally without except swallows nothing
        _model(
            "try:\n                    return cuda_extension.relu(x)\n                finally:\n"
            "                    pass"
        ),
    ],
)
def test_honest_python_is_accepted(source):
    assert names(source) == set()


def test_hybrid_allows_torch_ops_but_not_the_rest():
    src = _model(
        "try:\n                    return F.relu(x) + x.sum()\n                except Exception:\n"
        "                    return x",
        extra="import torch.nn.functional as F\n",
    )
    assert names(src, policy="hybrid") == {"try_fallback"}
    assert names(src, policy="strict") == {"try_fallback", "torch_ops_python"}


def test_syntax_error_is_one_finding():
    findings = check_sources("def broken(:\n", {}, "strict")
    assert [f.name for f in findings] == ["syntax"]


# --------------------------------------------------------------------------------------------
# C++ / CUDA
# --------------------------------------------------------------------------------------------

HONEST_CU = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include "../binding_registry.h"
// at::matmul would be cheating; "torch::relu" in a string too
__global__ void relu_kernel(const float* __restrict__ x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
torch::Tensor relu(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc, xc.options().dtype(torch::kFloat32));
  const at::cuda::OptionalCUDAGuard guard(device_of(xc));
  auto stream = at::cuda::getCurrentCUDAStream();
  int64_t n = xc.numel();
  relu_kernel<<<(n + 255) / 256, 256, 0, stream>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  std::vector<int64_t> sizes = x.sizes().vec();
  auto z = at::zeros({1}, x.options());
  return y.view(sizes);
}
"""

GEMM_CU = r"""
#include <cublas_v2.h>
#include <ATen/cuda/CUDAContext.h>
torch::Tensor gemm(torch::Tensor a, torch::Tensor b) {
  auto c = torch::empty({a.size(0), b.size(1)}, a.options());
  cublasHandle_t h = at::cuda::getCurrentCUDABlasHandle();
  float alpha = 1.f, beta = 0.f;
  cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, b.size(1), a.size(0), a.size(1), &alpha,
              b.data_ptr<float>(), b.size(1), a.data_ptr<float>(), a.size(1), &beta,
              c.data_ptr<float>(), b.size(1));
  return c;
}
"""


def cpp_names(source: str, policy: str = "strict") -> set[str]:
    return {f.name for f in check_cpp(source, "kernels/k.cu", policy) if f.severity == "error"}


def test_honest_cuda_and_cublas_gemm_pass():
    assert cpp_names(HONEST_CU) == set()
    assert cpp_names(GEMM_CU) == set()


@pytest.mark.parametrize(
    "snippet, expected",
    [
        ("torch::Tensor f(torch::Tensor a, torch::Tensor b) { return at::matmul(a, b); }", "torch_ops_cpp"),
        ("torch::Tensor f(torch::Tensor a) { return torch::relu(a); }", "torch_ops_cpp"),
        ("torch::Tensor f(torch::Tensor a) { return a.softmax(-1); }", "torch_ops_cpp"),
        ("torch::Tensor f(torch::Tensor a) { return at::native::relu(a); }", "torch_ops_cpp"),
        ("torch::Tensor f(torch::Tensor a) { return torch::nn::functional::gelu(a); }", "torch_ops_cpp"),
        ("auto fn = &at::mm;", "torch_ops_cpp"),
        ("void f(cublasHandle_t h, float* x) { float a = 2.f; cublasSscal(h, 10, &a, x, 1); }", "torch_ops_cpp"),
        ("void f(cudnnHandle_t h) { cudnnSoftmaxForward(h, 0, 0, 0, 0, 0, 0, 0, 0); }", "torch_ops_cpp"),
        ("#define CALL(a, b) a##b\nauto y = CALL(mat, mul)(x, w);", "token_pasting"),
        ("#define MM at::matmul\ntorch::Tensor f(torch::Tensor a) { return MM(a, a); }", "token_pasting"),
        ("void f() { cudaStream_t s; cudaStreamCreate(&s); k<<<1, 1, 0, s>>>(); }", "streams"),
        ("#include <thread>\nvoid f() { std::thread t([]{ work(); }); t.detach(); }", "threads"),
        ("void f() { pthread_create(&t, nullptr, work, nullptr); }", "threads"),
        ('void f() { FILE* fp = fopen("/tmp/cache", "r"); }', "file_env_access"),
        ('void f() { const char* m = getenv("MODE"); }', "file_env_access"),
        ('void f() { std::ifstream in("model.py"); }', "file_env_access"),
        ("void f() { c10::impl::ExcludeDispatchKeyGuard g(c10::DispatchKey::Python); }", "dynamic_code"),
        ('TORCH_LIBRARY(my, m) { m.def("f(Tensor x) -> Tensor"); }', "dynamic_code"),
        ("void f() { at::globalContext().setAllowTF32CuBLAS(true); }", "precision_flags"),
        ("using namespace at;\nTensor f(Tensor a) { return matmul(a, a); }", "torch_ops_cpp"),
        ("namespace A = at;\nauto f(torch::Tensor a) { return A::matmul(a, a); }", "torch_ops_cpp"),
        ('void f() { pybind11::module_::import("torch").attr("relu"); }', "dynamic_code"),
        ('void f() { PyRun_SimpleString("import os"); }', "dynamic_code"),
    ],
)
def test_rejected_cpp(snippet, expected):
    assert expected in cpp_names(snippet)


def test_stream_with_synchronize_is_accepted():
    src = "void f() { cudaStream_t s; cudaStreamCreate(&s); k<<<1, 1, 0, s>>>(); cudaStreamSynchronize(s); }"
    assert "streams" not in cpp_names(src)


def test_hybrid_allows_torch_ops_in_cpp():
    src = "torch::Tensor f(torch::Tensor a) { return at::matmul(a, a).relu(); }"
    assert cpp_names(src, "hybrid") == set()
    assert cpp_names(src, "strict") == {"torch_ops_cpp"}


def test_strip_keeps_lines_and_blanks_strings_and_comments():
    src = 'int a; // torch::relu\n/* at::mm\n */ const char* s = "fopen";\nauto r = R"x(getenv)x";\n'
    stripped = strip_cpp_comments_and_strings(src)
    assert stripped.count("\n") == src.count("\n")
    for word in ("relu", "at::mm", "fopen", "getenv"):
        assert word not in stripped
    assert "int a;" in stripped and "const char* s" in stripped


def test_cpp_location_has_the_line():
    [f] = check_cpp("int x;\n\nauto y = at::relu(t);\n", "kernels/a.cpp", "strict")
    assert f.location == "kernels/a.cpp:3"


# --------------------------------------------------------------------------------------------
# load_inline: the C++ in the Python string is checked as C++
# --------------------------------------------------------------------------------------------

KB_TEMPLATE = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_src = """
torch::Tensor run(torch::Tensor x);
"""
cuda_src = """
#include <torch/extension.h>
__global__ void k(const float* x, float* y, int n) {{ int i = threadIdx.x; if (i < n) y[i] = x[i] * 2.f; }}
torch::Tensor run(torch::Tensor x) {{
    {body}
}}
"""
ext = load_inline(name="kb", cpp_sources=cpp_src, cuda_sources=cuda_src, functions=["run"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.run(x)
'''


def test_load_inline_candidate_is_accepted():
    body = (
        "auto y = torch::empty_like(x); k<<<1, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel()); return y;"
    )
    assert check_sources(KB_TEMPLATE.format(body=body), {}, "strict") == []


def test_load_inline_cpp_is_checked_as_cpp():
    findings = check_sources(KB_TEMPLATE.format(body="return at::matmul(x, x);"), {}, "strict")
    assert [f.name for f in findings] == ["torch_ops_cpp"]
    assert "cuda_sources" in findings[0].location


def test_load_inline_with_computed_source_is_rejected():
    src = KB_TEMPLATE.format(body="return x;").replace(
        "cuda_sources=cuda_src", 'cuda_sources=cuda_src.replace("x", "y")'
    )
    assert "dynamic_code" in names(src)


def test_load_inline_macro_flag_is_rejected():
    src = KB_TEMPLATE.format(body="return x;").replace(
        'functions=["run"]', 'functions=["run"], extra_cuda_cflags=["-DMM=at::matmul"]'
    )
    assert "token_pasting" in names(src)


def test_separate_kernel_files_are_checked():
    findings = check_sources(
        HONEST_FORWARD, {"kernels/a.cu": HONEST_CU, "kernels/b.cpp": "auto y = at::relu(x);"}, "strict"
    )
    assert [(f.name, f.location) for f in findings] == [("torch_ops_cpp", "kernels/b.cpp:1")]


# --------------------------------------------------------------------------------------------
# The second line of defence: each class of bypass, in several spellings
# --------------------------------------------------------------------------------------------


def _mod(body: str, forward: str = "return cuda_extension.relu(x)") -> str:
    """A whole model_new.py: HEADER, then module-level `body`, then a ModelNew."""
    return (
        HEADER
        + textwrap.dedent(body)
        + textwrap.dedent(f"""

        class ModelNew(nn.Module):
            def forward(self, x):
                {forward}
        """)
    )


def details(source: str, policy: str = "strict") -> str:
    return "\n".join(f.to_detail() for f in check_sources(source, {}, policy) if f.severity == "error")


@pytest.mark.parametrize(
    "extra",
    [
        "import numpy\n",
        "import numpy as np\n",
        "from numpy import dot\n",
        "import pydoc\n",
        "import operator\n",
        "from operator import attrgetter\n",
        "import traceback\n",
        "import importlib.util\n",
        "import string\n",
        "import weakref\n",
        "import json\n",
        "import warnings\n",
        "import logging\n",
        "import einops\n",
        "import torch._dynamo\n",
        "from torch import _dynamo\n",
        "import torch.fx\n",
        "from torch import fx\n",
        "from torch import hub\n",
        "import torch.hub as h\n",
        "from torch.utils import benchmark\n",
        "import torch.utils._pytree\n",
        "import torch.package\n",
        "import torch.cuda.jiterator\n",
    ],
)
def test_imports_outside_the_allowlist_are_findings(extra):
    assert names(_model("return cuda_extension.relu(x)", extra=extra)) & {
        "dynamic_code",
        "torch_ops_python",
        "threads",
        "file_env_access",
    }


@pytest.mark.parametrize(
    "extra",
    [
        "import math\n",
        "import typing\nfrom typing import Optional, Tuple\n",
        "from dataclasses import dataclass\n",
        "import functools\n",
        "from functools import lru_cache\n",
        "from __future__ import annotations\n",
        "import collections.abc\n",
        "import itertools\n",
        "from enum import Enum\n",
        "import os\n",
        "from torch.utils.cpp_extension import load_inline\n",
        "import torch.nn.functional as F\n",
        "from torch import nn, Tensor\n",
        "import cuda_extension as ext\n",
        "from cuda_extension import relu\n",
        "import cmath, numbers, copy, abc, contextlib\n",
    ],
)
def test_allowlisted_imports_pass(extra):
    assert names(_model("return cuda_extension.relu(x)", extra=extra)) == set()


def test_numpy_is_allowed_under_hybrid_only():
    src = _model("return cuda_extension.relu(x)", extra="import numpy as np\n")
    assert names(src, policy="hybrid") == set()
    assert "torch_ops_python" in names(src, policy="strict")


@pytest.mark.parametrize(
    "forward",
    [
        "a = x.numpy()\n                return torch.as_tensor(a @ a)",
        "return torch.from_numpy(x.cpu().numpy())",
        "a = x.__array__()\n                return cuda_extension.relu(x)",
        "return torch.as_tensor(x.detach().numpy().dot(x.numpy()))",
    ],
)
def test_numpy_round_trips_in_forward_are_torch_ops_under_strict(forward):
    src = _model(forward)
    assert "torch_ops_python" in names(src, policy="strict")
    assert "torch_ops_python" not in names(src, policy="hybrid")


@pytest.mark.parametrize(
    "source",
    [
        # frames in attribute form
        _mod("def f():\n    g = (lambda: (yield))()\n    return g.gi_frame.f_back.f_locals\n"),
        _mod("def f(tb):\n    return tb.tb_frame.f_globals\n"),
        _mod("async def f():\n    pass\nC = f().cr_frame\n"),
        _mod("def f(g):\n    return g.ag_frame\n"),
        _mod("def f(x):\n    return x.tb_next\n"),
        _mod("def f(fn):\n    return fn.__code__.co_consts\n"),
        _mod("def f(fn):\n    return fn.__closure__[0].cell_contents\n"),
        _mod("def f(fn):\n    return fn.__globals__['torch']\n"),
        _mod("def f(fn):\n    return fn.__wrapped__\n"),
        _mod("def f(fn):\n    fn.__defaults__ = (1,)\n"),
        _mod("M = nn.Module.mro()\n"),
        # frames in getattr form, however the name is spelled
        _mod("def f(g):\n    return getattr(g, 'gi_frame')\n"),
        _mod("def f(g):\n    return getattr(g, 'f_' 'back')\n"),
        _mod("def f(g):\n    return getattr(g, 'f_' + 'back')\n"),
        _mod("NAME = 'f_back'\ndef f(g):\n    return getattr(g, NAME)\n"),
        _mod("NAME = ''.join(['f_', 'back'])\ndef f(g):\n    return getattr(g, NAME)\n"),
        _mod("def f(g):\n    return hasattr(g, '__globals__')\n"),
        _mod("def f(g):\n    return g.__getattribute__('f_back')\n"),
        _mod("def f(g):\n    return object.__getattribute__(g, 'f_locals')\n"),
        _mod("def f(g):\n    return vars(g)['x']\n"),
        _mod("def f():\n    return globals()['torch']\n"),
        _mod("def f(m):\n    return m.__dict__['relu']\n"),
        _mod("import functools\ndef f(g):\n    return functools.reduce(getattr, ['f_back', 'f_locals'], g)\n"),
        _mod("g = getattr\ndef f(x):\n    return g(x, 'f_back')\n"),
        _mod("def f(x):\n    return list(map(getattr, [x], ['tb_frame']))\n"),
        _mod("def f(x):\n    return '{0.f_back.f_locals}'.format(x)\n"),
        _mod("FMT = '{0.__glo' + 'bals__}'\ndef f(x):\n    return FMT.format(x)\n"),
        # the modules that hand out frames
        _mod("import sys\nF = sys._getframe(1)\n"),
        _mod("import inspect\nF = inspect.currentframe()\n"),
        _mod("import traceback\nS = traceback.extract_stack()\n"),
        _mod("F = torch.sys._getframe(1)\n"),
        _mod("F = torch.inspect.currentframe()\n"),
        _mod("from torch.utils.cpp_extension import sys as s\nF = s._getframe\n"),
    ],
)
def test_frame_and_code_introspection_is_refused(source):
    assert "dynamic_code" in names(source), details(source)


@pytest.mark.parametrize(
    "source",
    [
        _mod("[torch][0].relu = lambda t: t\n"),
        _mod("mods = [torch]\nmods[0].allclose = lambda *a, **k: True\n"),
        _mod("d = {'t': torch}\nd['t'].allclose = lambda *a, **k: True\n"),
        _mod("d = dict(t=torch)\nd['t'].allclose = lambda *a, **k: True\n"),
        _mod("m = [torch][0]\nm.relu = lambda t: t\n"),
        _mod("for m in [torch, nn]:\n    m.relu = lambda t: t\n"),
        _mod("def get():\n    return torch\nget().relu = lambda t: t\n"),
        _mod("(lambda: torch)().relu = lambda t: t\n"),
        _mod("m = next(iter([torch]))\nm.relu = lambda t: t\n"),
        _mod("m = torch if True else None\nm.relu = lambda t: t\n"),
        _mod("import functools\nm = functools.reduce(lambda a, b: b, [nn, torch])\nm.relu = None\n"),
        _mod("import sys\nsys.modules['model'].Model = nn.Identity\n"),
        _mod("setattr([torch][0], 'relu', abs)\n"),
        _mod("setattr(torch, 'relu', abs)\n"),
        _mod("delattr(torch.nn.functional, 'relu')\n"),
        _mod("del torch.nn.functional.relu\n"),
        _mod("[torch][0].__dict__['relu'] = abs\n"),
        _mod("torch.cuda.Event.elapsed_time = lambda s, e: 1.0\n"),
        _mod("torch.Tensor.__eq__ = lambda a, b: True\n"),
        _mod("torch.nn.functional.relu.__defaults__ = ()\n"),
        _mod("T = torch.Tensor\nT.sum = None\n"),
        _mod("class A:\n    pass\nA.__bases__ = (nn.Module,)\n"),
        _mod("def patch(m):\n    m.allclose = None\npatch(torch)\n"),
        _mod("class P:\n    def go(self):\n        self.allclose = None\nP.go(torch)\n"),
        _mod(
            "import functools\nclass P:\n    def go(self):\n        self.allclose = None\nfunctools.partial(P.go, torch)()\n"
        ),
        _mod("x = {'t': torch}\nx['t'].relu += 1\n"),
        _mod(
            "",
            forward="self.t = torch\n                self.t.relu = abs\n                return cuda_extension.relu(x)",
        ),
    ],
)
def test_assignments_to_bases_that_cannot_be_resolved_are_patches(source):
    assert "dynamic_code" in names(source), details(source)


@pytest.mark.parametrize(
    "source",
    [
        # attributes of self, of plain objects and instances made in the file, items of own containers
        _mod(
            "class Box:\n    pass\nB = Box()\nB.size = 4\nO = object.__new__(Box)\n".replace(
                "O = object.__new__(Box)\n", ""
            )
        ),
        _mod("cache = {}\ncache['k'] = 1\nitems = [1, 2]\nitems[0] = 3\n"),
        _model(
            "self.out = None\n                if self.out is None or self.out.shape != x.shape:\n"
            "                    self.out = torch.empty_like(x)\n"
            "                cuda_extension.relu_into(x, self.out)\n                return self.out"
        ),
        _model(
            "out = torch.empty_like(x)\n                out[0] = 0\n                out[1:] = x[1:]\n"
            "                cuda_extension.relu_into(x, out)\n                return out"
        ),
        _model(
            "return cuda_extension.relu(x)",
            init_body="self.linear = nn.Linear(4, 4); self.linear.weight.requires_grad = False",
        ),
        _model(
            "return cuda_extension.relu(x)",
            init_body="for p in self.parameters():\n                    p.requires_grad = False",
        ),
        _model("return cuda_extension.relu(x)", init_body="setattr(self, 'scale', 2.0)"),
        _model("outs = [x, x]\n                outs[0] = cuda_extension.relu(x)\n                return outs[0]"),
        _model(
            "buf = self.buf\n                buf.zero_()\n                cuda_extension.relu_into(x, buf)\n"
            "                return buf",
            init_body="self.register_buffer('buf', torch.zeros(4))",
        ),
    ],
)
def test_legal_assignments_stay_legal(source):
    assert names(source) == set(), details(source)


@pytest.mark.parametrize(
    "source",
    [
        _mod("import pydoc\nE = pydoc.locate('builtins.exec')\n"),
        _mod("import importlib\nE = importlib.import_module('builtins').exec\n"),
        _mod("import operator\nE = operator.methodcaller('system', 'true')\n"),
        _mod("import functools\nE = functools.reduce(getattr, ['exec'], __builtins__)\n"),
        _mod("import builtins\nE = builtins.__dict__['exec']\n"),
        _mod("E = torch.builtins.exec\n"),
        _mod("E = torch.os.system\n"),
        _mod("E = torch.utils.cpp_extension.subprocess.run\n"),
        _mod("E = torch.utils.cpp_extension.importlib.import_module('os')\n"),
        _mod("from torch.utils.cpp_extension import os as o\nE = o.system\n"),
        _mod("import torch._dynamo\n"),
        _mod("E = torch._dynamo.eval_frame\n"),
        _mod("G = torch.fx.symbolic_trace(nn.Identity())\n"),
        _mod("H = torch.hub.load('scratch', 'entry', source='local')\n"),
        _mod("T = torch.utils.benchmark.Timer(stmt='import os')\n"),
        _mod("F = torch.cuda.jiterator._create_jit_fn('template <typename T> T f(T x) { return x; }')\n"),
        _mod("M = torch.ops.import_module('os')\n"),
        _mod("C = torch.jit.CompilationUnit('def f(x):\\n    return x')\n"),
        _mod("import typing\ndef f(x: 'exec(1)'):\n    pass\nH = typing.get_type_hints(f)\n"),
        _mod("S = torch.package.PackageImporter('scratch/p.zip')\n"),
        _mod("torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: o)\n"),
        _mod("E = eval\n"),
        _mod("def f(run=exec):\n    run('1')\n"),
        _mod("class X:\n    def __del__(self):\n        pass\n"),
        _mod(
            "class T(torch.Tensor):\n    @classmethod\n    def __torch_function__(cls, f, t, a=(), k=None):\n"
            "        return True\n"
        ),
        _mod("class Meta(type):\n    pass\nclass X(metaclass=Meta):\n    pass\n"),
    ],
)
def test_exec_reached_through_a_library_is_dynamic_code(source):
    assert "dynamic_code" in names(source), details(source)


def test_extension_may_not_be_handed_a_module():
    src = _model("return cuda_extension.patch(torch, x)")
    assert "dynamic_code" in names(src)
    assert names(_model("return cuda_extension.relu(x, torch.float32)")) == set()


@pytest.mark.parametrize(
    "flags, ok",
    [
        ('extra_ldflags=["-lcublas", "-L/usr/local/cuda/lib64"]', True),
        (
            'extra_cflags=["-O3", "-std=c++17"], extra_cuda_cflags=["-O3", "--use_fast_math", "-Xcompiler", "-fopenmp"]',
            True,
        ),
        ('extra_ldflags=["-Lscratch", "-lcublas"]', False),
        ('extra_ldflags=["-lpython3.12"]', False),
        ('extra_ldflags=["scratch/evil.so"]', False),
        ('extra_include_paths=["scratch"]', False),
        ('extra_cflags=["-Xcompiler=-include,/tmp/evil.h"]', False),
    ],
)
def test_build_flags_that_bring_in_unchecked_code(flags, ok):
    src = KB_TEMPLATE.format(body="return x;").replace('functions=["run"]', f'functions=["run"], {flags}')
    assert (names(src) == set()) is ok, details(src)


def test_load_sources_must_be_the_checked_kernels():
    ok = _model(
        "return cuda_extension.relu(x)",
        extra=(
            "import os\nfrom torch.utils.cpp_extension import load\nHERE = os.path.dirname(__file__)\n"
            "ext = load('k', [os.path.join(HERE, 'kernels', 'k.cu')])\n"
        ),
    )
    assert names(ok) == set(), details(ok)
    bad = ok.replace("'kernels', 'k.cu'", "'scratch', 'k.cu'")
    assert "dynamic_code" in names(bad)


# --------------------------------------------------------------------------------------------
# C++: the interpreter, processes, dispatch keys and member pointers, however spelled
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "snippet",
    [
        # the CPython C API
        "void f() { PyFrameObject* fr = PyEval_GetFrame(); }",
        "void f() { auto* ts = PyThreadState_Get(); auto* fr = PyThreadState_GetFrame(ts); }",
        'void f(PyObject* o) { PyObject_SetAttrString(o, "x", o); }',
        "void f() { PyObject* l = PyFrame_GetLocals(nullptr); }",
        "void f() { _PyObject_GetAttrId(nullptr, nullptr); }",
        "void f() { Py_INCREF(nullptr); }",
        "#include <Python.h>\nvoid f() {}",
        "#include <frameobject.h>\nvoid f() {}",
        "void f(at::Tensor t) { auto o = THPVariable_Wrap(t); }",
        # embedded interpreter, however spelled
        'void f() { pybind11::exec("import os"); }',
        'void f() { py::eval("1"); }',
        'void f() { py::eval<py::eval_statements>("x = 1"); }',
        'void f() { pybind11::eval_file("/tmp/x.py"); }',
        'namespace q = pybind11;\nvoid f() { q::exec("import os"); }',
        'namespace q = pybind11;\nnamespace r = q;\nvoid f() { r::module_::import("os"); }',
        'using pybind11::exec;\nvoid f() { exec("import os"); }',
        'namespace q = pybind11;\nusing q::exec;\nvoid f() { exec("1"); }',
        'using namespace pybind11;\nvoid f() { exec("import os"); }',
        'using namespace pybind11;\nvoid f() { auto m = module_::import("os"); }',
        'void f() { py::module::import("time").attr("sleep")(1); }',
        "void f() { auto g = py::globals(); }",
        "#include <pybind11/embed.h>\nvoid f() {}",
        "void f() { py::scoped_interpreter guard{}; }",
        "void f() { pybind11::initialize_interpreter(); }",
        'void f(py::object o) { py::setattr(o, "x", o); }',
        "void f() { torch::python::bind_module<int>(); }",
        # load time and exit hooks
        "__attribute__((constructor)) static void early() {}",
        "[[gnu::constructor]] static void early() {}",
        "static int r = atexit([]{});",
        'static void (*p)() __attribute__((section(".init_array"))) = nullptr;',
    ],
)
def test_cpp_interpreter_access_is_dynamic_code(snippet):
    assert "dynamic_code" in cpp_names(snippet, "hybrid")


@pytest.mark.parametrize(
    "snippet",
    [
        "#include <unistd.h>\nvoid f() { syscall(57); }",
        "void f() { ::syscall(SYS_fork); }",
        "void f() { long n = __NR_clone; }",
        'void f() { asm volatile("mov $57, %%rax; syscall" ::: "rax"); }',
        'void f() { __asm__("sys" "call"); }',
        'void f() { asm(".byte 0x0f, 0x05"); }',
        "void f() { if (fork() == 0) {} }",
        "void f() { auto p = &fork; p(); }",
        "void f() { (vfork)(); }",
        "void f() { clone(nullptr, nullptr, 0, nullptr); }",
        'void f() { posix_spawn(nullptr, "/bin/sh", nullptr, nullptr, nullptr, nullptr); }',
        'void f() { execve("/bin/sh", nullptr, nullptr); }',
        'void f() { execlp("sh", "sh", nullptr); }',
        "void f() { daemon(0, 0); }",
        'void f() { std::system("sleep 100 &"); }',
        "void f() { prctl(1, 0); }",
        "void f() { ptrace(0, 0, 0, 0); }",
        "void f() { kill(1, 9); }",
        "void f() { setsid(); }",
        "void f() { signal(14, handler); }",
        "void f() { at::launch([]{}); }",
        "#include <sys/syscall.h>\nvoid f() {}",
        "void f() { std::async(std::launch::async, []{}); }",
    ],
)
def test_cpp_processes_and_raw_syscalls_are_threads(snippet):
    found = cpp_names(snippet, "hybrid")
    assert found & {"threads", "dynamic_code"}, found


@pytest.mark.parametrize(
    "snippet",
    [
        'void f() { void* h = dlopen("libx.so", 2); }',
        'void f() { auto p = dlsym(RTLD_NEXT, "open"); }',
    ],
)
def test_cpp_dynamic_loading_is_refused(snippet):
    assert "file_env_access" in cpp_names(snippet, "hybrid")


@pytest.mark.parametrize(
    "snippet",
    [
        "void f() { c10::impl::ExcludeDispatchKeyGuard g(c10::DispatchKey::Python); }",
        "namespace ci = c10::impl;\nvoid f() { ci::ExcludeDispatchKeyGuard g(c10::DispatchKeySet(c10::DispatchKey::Python)); }",
        "namespace A = at;\nvoid f() { c10::impl::tls_set_dispatch_key_excluded(c10::DispatchKey::Python, true); }",
        "void f() { c10::impl::IncludeDispatchKeyGuard g(c10::DispatchKey::CPU); }",
        "void f() { auto s = c10::impl::tls_local_dispatch_key_set(); }",
        "void f() { at::AutoDispatchBelowADInplaceOrView g; }",
        "void f() { at::ThreadLocalStateGuard g(state); }",
        'void f() { auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::mm", ""); }',
        "#include <c10/core/impl/LocalDispatchKeySet.h>\nvoid f() {}",
    ],
)
def test_cpp_dispatch_key_manipulation_is_dynamic_code(snippet):
    assert "dynamic_code" in cpp_names(snippet, "hybrid")


@pytest.mark.parametrize(
    "snippet",
    [
        "auto p = &at::Tensor::add;",
        "auto p = &torch::Tensor::matmul;",
        "namespace A = at;\nauto p = &A::Tensor::mul;",
        "namespace A = ::at;\nauto p = &A::Tensor::mm;",
        "using T = at::Tensor;\nauto p = &T::sum;",
        "typedef torch::Tensor T;\nauto p = &T::relu;",
        "using at::Tensor;\nauto p = &Tensor::addmm_;",
        "at::Tensor f(at::Tensor x) { auto p = &std::remove_reference_t<decltype(x)>::matmul; return (x.*p)(x); }",
        "at::Tensor f(at::Tensor x) { auto g = std::mem_fn(&at::Tensor::sigmoid); return g(x); }",
        "at::Tensor (at::Tensor::*p)(const at::Tensor&) const = nullptr;",
        "at::Tensor f(at::Tensor x) { auto p = &decltype(x)::tanh; return (x.*p)(); }",
        "using at::matmul;\nat::Tensor f(at::Tensor a) { return matmul(a, a); }",
        "namespace N = at::native;\nat::Tensor f(at::Tensor a) { return N::relu(a); }",
        "namespace A = at;\nnamespace B = A;\nat::Tensor f(at::Tensor a) { return B::mm(a, a); }",
        "at::Tensor f(at::Tensor a) { return at::_ops::mm::call(a, a); }",
    ],
)
def test_cpp_member_pointers_and_aliases_reach_torch_ops_under_strict(snippet):
    assert "torch_ops_cpp" in cpp_names(snippet, "strict"), check_cpp(snippet, "k.cu", "strict")


@pytest.mark.parametrize(
    "snippet",
    [
        "#define CALL sys\\\ncall\nvoid f() {}",
        "void f() { sys\\\ncall(1); }",
        "#define X(a, b) a %:%: b\nvoid f() {}",
    ],
)
def test_cpp_identifiers_assembled_by_the_preprocessor(snippet):
    assert "token_pasting" in cpp_names(snippet, "hybrid")


@pytest.mark.parametrize("include", ['"../scratch/evil.h"', '"/tmp/evil.h"', "<../../scratch/x.h>", "EVIL_HEADER"])
def test_cpp_includes_outside_the_checked_sources(include):
    assert "dynamic_code" in cpp_names(f"#include {include}\nvoid f() {{}}", "hybrid")


# Honest kernels the rules above must leave alone.
COOPERATIVE_CU = r"""
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <torch/extension.h>
#include "../binding_registry.h"
namespace cg = cooperative_groups;
__global__ void reduce_all(const float* x, float* partial, float* out, int n) {
  cg::grid_group grid = cg::this_grid();
  float s = 0.f;
  for (int i = grid.thread_rank(); i < n; i += grid.size()) s += x[i];
  partial[grid.thread_rank()] = s;
  grid.sync();
  if (grid.thread_rank() == 0) { float t = 0.f; for (int i = 0; i < (int)grid.size(); ++i) t += partial[i]; *out = t; }
}
torch::Tensor sum_all(torch::Tensor x) {
  auto partial = torch::empty({64 * 256}, x.options());
  auto out = torch::empty({1}, x.options());
  partial.zero_();
  const float* px = x.data_ptr<float>(); float* pp = partial.data_ptr<float>(); float* po = out.data_ptr<float>();
  int n = static_cast<int>(x.numel());
  void* args[] = {(void*)&px, (void*)&pp, (void*)&po, (void*)&n};
  cudaLaunchCooperativeKernel((void*)reduce_all, dim3(64), dim3(256), args, 0, at::cuda::getCurrentCUDAStream());
  return out;
}
"""

FP16_CU = r"""
#include <cuda_fp16.h>
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <limits>
__global__ void dot_rows(const __half* a, const __half* b, __half* y, int rows, int k) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float acc = 0.f;  // fp16 inputs, fp32 accumulation
  for (int i = 0; i < k; ++i) acc = fmaf(__half2float(a[r * k + i]), __half2float(b[i]), acc);
  float lo = -std::numeric_limits<float>::max();
  y[r] = __float2half(fmaxf(acc, lo));
}
torch::Tensor dot(torch::Tensor a, torch::Tensor b) {
  TORCH_CHECK(a.scalar_type() == at::kHalf, "fp16 only");
  using acc_t = at::opmath_type<at::Half>;
  auto y = torch::empty({a.size(0)}, a.options());
  auto tmp = torch::empty({a.size(0)}, a.options().dtype(at::kFloat));
  tmp.fill_(0);
  dot_rows<<<(a.size(0) + 127) / 128, 128, 0, at::cuda::getCurrentCUDAStream()>>>(
      reinterpret_cast<const __half*>(a.data_ptr<at::Half>()), reinterpret_cast<const __half*>(b.data_ptr<at::Half>()),
      reinterpret_cast<__half*>(y.data_ptr<at::Half>()), a.size(0), a.size(1));
  return y;
}
"""

CUBLASLT_CU = r"""
#include <cublasLt.h>
#include <cublas_v2.h>
#include <ATen/cuda/CUDAContext.h>
#include <torch/extension.h>
torch::Tensor gemm(torch::Tensor a, torch::Tensor b, torch::Tensor out) {
  cublasHandle_t h = at::cuda::getCurrentCUDABlasHandle();
  cublasSetStream(h, at::cuda::getCurrentCUDAStream());
  float alpha = 1.f, beta = 0.f;
  cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 64, 64, 64, &alpha, b.data_ptr(), CUDA_R_16F, 64, 0,
                             a.data_ptr(), CUDA_R_16F, 64, 0, &beta, out.data_ptr(), CUDA_R_16F, 64, 0, 1,
                             CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  cublasLtHandle_t lt;
  cublasLtCreate(&lt);
  cublasLtMatmulDesc_t desc;
  cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasLtMatmul(lt, desc, &alpha, a.data_ptr(), nullptr, b.data_ptr(), nullptr, &beta, out.data_ptr(), nullptr,
                 out.data_ptr(), nullptr, nullptr, nullptr, 0, at::cuda::getCurrentCUDAStream());
  cublasLtMatmulDescDestroy(desc);
  cublasLtDestroy(lt);
  return out;
}
"""

PTX_CU = r"""
#include <cuda_runtime.h>
__device__ __forceinline__ unsigned lane_id() { unsigned r; asm volatile("mov.u32 %0, %%laneid;" : "=r"(r)); return r; }
__device__ __forceinline__ float ld_stream(const float* p) { float v; asm("ld.global.cs.f32 %0, [%1];" : "=f"(v) : "l"(p)); return v; }
__global__ void copy(const float* x, float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = ld_stream(x + i) + lane_id() * 0.f; }
"""

BINDING_CPP = r"""
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include "../binding_registry.h"
torch::Tensor relu(torch::Tensor x);
static void register_relu(pybind11::module& m) {
  m.def("relu", &relu, "relu (CUDA)", py::arg("x"));
}
REGISTER_BINDING(relu, register_relu);
"""


@pytest.mark.parametrize("source", [COOPERATIVE_CU, FP16_CU, CUBLASLT_CU, PTX_CU, BINDING_CPP, GEMM_CU, HONEST_CU])
def test_honest_cuda_passes_under_strict(source):
    assert cpp_names(source, "strict") == set(), check_cpp(source, "kernels/k.cu", "strict")


def test_honest_signal_and_clone_words_are_not_processes():
    src = (
        "at::Tensor f(at::Tensor signal) { auto c = signal.clone(); float kill = 0.f; "
        "auto t = torch::empty_like(c); t.copy_(c); return t; }"
    )
    assert cpp_names(src, "strict") == set()


def test_pybind_attr_into_the_interpreter_is_left_to_the_runtime_layer_unless_asked():
    src = (
        'py::object f(torch::Tensor x) { auto g = py::cast(x).attr("__class__").attr("__globals__"); '
        'g["torch"].attr("allclose") = g; return g; }'
    )
    assert check_cpp(src, "kernels/k.cpp", "hybrid") == []
    findings = check_cpp(src, "kernels/k.cpp", "hybrid", runtime_covered="error")
    assert any(f.name == "dynamic_code" and "__globals__" in f.reason for f in findings)
    assert any("writes a Python attribute" in f.reason for f in findings)
    assert (
        check_cpp('py::object f(py::object o) { return o.attr("relu")(); }', "k.cpp", "hybrid", runtime_covered="error")
        == []
    )


@pytest.mark.parametrize(
    "body, finding",
    [
        ("class X:\n    t = torch\nX.t.relu = abs\n", "dynamic_code"),
        ("class Y(nn.Module):\n    t = torch\n    def f(self):\n        self.t.relu = abs\n", "dynamic_code"),
        ("class B:\n    pass\nb = B()\nb.m = torch\nb.m.relu = abs\n", "dynamic_code"),
        ("d = {}\nd['t'] = torch\nd['t'].relu = abs\n", "dynamic_code"),
        ("l = []\nl.append(torch)\nl[0].relu = abs\n", "dynamic_code"),
        ("[m for m in [torch]][0].relu = abs\n", "dynamic_code"),
        ("(m := torch).relu = abs\n", "dynamic_code"),
        ("a, = (torch,)\na.relu = abs\n", "dynamic_code"),
        (
            "from torch.utils.cpp_extension import load_inline\n"
            "ext = load_inline('n', cpp_sources='int f();', functions=['f); } void g() { std::system(0'])\n",
            "dynamic_code",
        ),
        (
            "from torch.utils.cpp_extension import load_inline\n"
            "ext = load_inline('n, m) {} void g(', cpp_sources='int f();', functions=['f'])\n",
            "dynamic_code",
        ),
        (
            "from torch.utils.cpp_extension import load_inline\n"
            "ext = load_inline('n', cpp_sources='int f();', functions={'f': 'doc\"); system(\"x'})\n",
            "dynamic_code",
        ),
        (
            "from torch.utils.cpp_extension import load_inline\n"
            "ext = load_inline('n', cpp_sources='int f();', functions=['f'], build_directory='scratch/b')\n",
            "dynamic_code",
        ),
        (
            "class S:\n    def __enter__(self):\n        return self\n    def __exit__(self, *a):\n        return True\n",
            "try_fallback",
        ),
        ("F = torch.jit.fork(abs, 1)\n", "threads"),
    ],
)
def test_patches_and_loaders_through_indirection(body, finding):
    src = _mod(body)
    assert finding in names(src), details(src)


def test_load_inline_with_names_bound_elsewhere_passes():
    src = _mod(
        "from torch.utils.cpp_extension import load_inline\nFUNCS = ['run']\nNAME = 'kb_ext'\n"
        "ext = load_inline(NAME, cpp_sources='int run();', functions=FUNCS, verbose=False)\n"
    )
    assert names(src) == set(), details(src)


@pytest.mark.parametrize(
    "snippet, finding",
    [
        ('extern "C" int spawn() __asm__("fork");', "threads"),
        ('static int myf() __attribute__((weakref("fork")));', "dynamic_code"),
        ("#pragma redefine_extname myfork fork\nint myfork();", "dynamic_code"),
        ("void f() { sys\\u0063all(57); }", "token_pasting"),
        ('#include "evil.inc"\n', "dynamic_code"),
        ("namespace s = std;\nvoid f() { s::thread t([]{}); t.detach(); }", "threads"),
        ("using namespace std;\nvoid f() { thread t([]{}); t.detach(); }", "threads"),
        ("using namespace std;\nvoid f() { auto r = async(launch::async, []{}); }", "threads"),
        ("void f() { process_vm_writev(1, 0, 0, 0, 0, 0); }", "threads"),
        ("void f() { int fd = pidfd_getfd(3, 4, 0); }", "threads"),
        ("void f() { setpriority(0, getppid(), 19); }", "threads"),
    ],
)
def test_cpp_renamed_and_respelled_calls(snippet, finding):
    assert finding in cpp_names(snippet, "hybrid"), check_cpp(snippet, "k.cu", "hybrid")


@pytest.mark.parametrize(
    "forward, policy, finding",
    [
        ("return torch.as_tensor(getattr(x, 'numpy')())", "strict", "torch_ops_python"),
        ("return getattr(x, 'sum')(dim=1)", "strict", "torch_ops_python"),
        ("return torch.utils.cpp_extension.np.maximum(x, 0)", "strict", "torch_ops_python"),
        ("return torch.compile(cuda_extension.relu, backend=lambda gm, ex: gm)(x)", "hybrid", "dynamic_code"),
        ("return torch.compile(cuda_extension.relu, options={'cpp.cxx': 'sh'})(x)", "hybrid", "dynamic_code"),
        ("torch.utils.collect_env.main()\n                return x", "hybrid", "dynamic_code"),
        ("torch.utils.tensorboard.SummaryWriter('scratch')\n                return x", "hybrid", "dynamic_code"),
        ("torch.cuda.memory.change_current_allocator(None)\n                return x", "hybrid", "dynamic_code"),
        ("torch.cuda.tunable.enable()\n                return x", "hybrid", "file_env_access"),
    ],
)
def test_more_library_routes(forward, policy, finding):
    src = _model(forward)
    assert finding in names(src, policy=policy), details(src, policy)


@pytest.mark.parametrize(
    "snippet, policy, finding",
    [
        ("at::Tensor f(at::Tensor x) { return x.template relu<>(); }", "strict", "torch_ops_cpp"),
        ('#define INSN "sys" "call"\nvoid f() { asm volatile(INSN); }', "hybrid", "threads"),
        ('void f() { asm(R"(syscall)"); }', "hybrid", "threads"),
        ("#include <functional>\nstd::function<int(const char*)> run = system;", "hybrid", "threads"),
        ("void f() { boost::thread(work).detach(); }", "hybrid", "threads"),
        ("void f() { auto& i = pybind11::detail::get_internals(); }", "hybrid", "dynamic_code"),
    ],
)
def test_more_cpp_spellings(snippet, policy, finding):
    assert finding in cpp_names(snippet, policy), check_cpp(snippet, "k.cu", policy)


def test_helper_thread_through_a_std_alias_is_left_to_the_runtime_layer_unless_asked():
    """The runtime suite's helper thread takes this route to reach the runtime threads check."""
    src = "namespace conc = std;\nvoid f() { conc::thread([]{}).detach(); }"
    assert check_cpp(src, "k.cpp", "hybrid") == []
    assert [(f.name, f.severity) for f in check_cpp(src, "k.cpp", "hybrid", runtime_covered="error")] == [
        ("threads", "error")
    ]
    assert [
        f.severity
        for f in check_cpp(
            "#define CONC std\nvoid f() { CONC::thread([]{}).detach(); }", "k.cpp", "hybrid", runtime_covered="warning"
        )
    ] == ["warning"]
    assert [f.severity for f in check_cpp("void f() { std::thread([]{}).detach(); }", "k.cpp", "hybrid")] == ["error"]


def test_long_chains_of_rebinding_stay_legal_and_fast():
    import time

    body = (
        "out = torch.empty_like(x)\n"
        + "".join(
            "                x = x.contiguous()\n                out = out.view(-1) if x.numel() else out\n"
            for _ in range(40)
        )
        + "                out[0] = 0\n                cuda_extension.relu_into(x, out)\n"
        "                return out"
    )
    started = time.perf_counter()
    assert names(_model(body)) == set()
    assert time.perf_counter() - started < 2


def test_nesting_too_deep_to_check_is_one_finding():
    src = "x = " + "(" * 5000 + "1" + ")" * 5000 + "\n"
    assert [f.name for f in check_sources(src, {}, "strict")] == ["syntax"]


def test_a_parameter_named_like_a_builtin_is_fine_but_rebinding_one_is_not():
    src = (
        HEADER
        + "class ModelNew(nn.Module):\n    def forward(self, input):\n        return cuda_extension.relu(input)\n"
    )
    assert names(src) == set(), details(src)
    assert "dynamic_code" in names(_mod("getattr = getattr\nf = getattr\n"))
    assert "dynamic_code" in names(_mod("def f(x, g=getattr):\n    return g(x, 'y')\n"))


def test_numeric_limits_beside_a_tensor_is_not_a_member_pointer():
    src = (
        "at::Tensor f(at::Tensor x) { at::Tensor y = torch::full({1}, std::numeric_limits<float>::max(), "
        "x.options()); auto lo = std::numeric_limits<float>::min(); return y; }"
    )
    assert cpp_names(src, "strict") == set(), check_cpp(src, "k.cu", "strict")
    multi = '#define CHECK_INPUT(x) \\\n  TORCH_CHECK(x.is_contiguous(), "contiguous")\nint THPUT_MAX = 4;\n'
    assert cpp_names(multi, "strict") == set(), check_cpp(multi, "k.cu", "strict")


@pytest.mark.parametrize(
    "source",
    [
        _model("return f(x)\n\n            def helper(self, x, f=torch.relu):\n                return f(x)"),
        _model("return self.act(x)", init_body="self.act = torch.relu"),
        _model("return self.act(x)", init_body="self.act = nn.GELU()"),
        _model("return self.lin(x)", init_body="self.lin = nn.Linear(4, 4)"),
        HEADER + "import torch.nn.functional as F\nclass ModelNew(nn.Module):\n    forward = staticmethod(F.relu)\n",
        _model("return list(map(torch.tanh, [x]))[0]"),
    ],
)
def test_torch_ops_handed_around_as_values_under_strict(source):
    assert "torch_ops_python" in names(source, policy="strict"), details(source)
    assert "torch_ops_python" not in names(source, policy="hybrid")


def test_torch_data_attributes_are_not_ops():
    src = _model(
        "y = torch.empty(x.shape, dtype=torch.float16, memory_format=torch.contiguous_format)\n"
        "                assert isinstance(x, torch.Tensor) and x.dtype in (torch.float32, torch.bfloat16)\n"
        "                cuda_extension.relu_into(x, y, torch.inf, torch.pi)\n                return y",
        init_body="self.lin = nn.Linear(4, 4); self.blocks = nn.ModuleList([nn.Linear(4, 4)])",
    )
    assert names(src) == set(), details(src)


@pytest.mark.parametrize(
    "snippet",
    [
        "void f() { at::AutoNonVariableTypeMode g(true); }",
        "void f() { at::impl::PythonTorchFunctionTLS::set_disabled_state(at::impl::TorchFunctionDisabledState::ALL_DISABLED); }",
        "void f() { torch::DisableTorchFunction g; }",
    ],
)
def test_cpp_torch_function_and_mode_state_is_dynamic_code(snippet):
    assert "dynamic_code" in cpp_names(snippet, "hybrid")


def test_help_imports_modules():
    assert "dynamic_code" in names(_mod("help('os')\n"))


@pytest.mark.parametrize(
    "extra",
    [
        "from cuda_extension import __builtins__ as b\n",
        "from torch import __dict__ as d\n",
        "from torch.nn import functional as F\nG = F.__globals__\n",
    ],
)
def test_interpreter_internals_imported_by_name(extra):
    assert "dynamic_code" in names(_model("return cuda_extension.relu(x)", extra=extra))


@pytest.mark.parametrize(
    "snippet",
    [
        '#include <filesystem>\nvoid f() { for (auto& e : std::filesystem::directory_iterator("..")) {} }',
        'void f() { unlink("/tmp/x"); }',
        'void f() { ::rename("a", "b"); }',
    ],
)
def test_cpp_filesystem_access(snippet):
    assert "file_env_access" in cpp_names(snippet, "hybrid")


def test_cpp_members_named_like_file_calls_pass():
    assert cpp_names("void f(Q& q) { q.rename(1); q.mkdir(); q.open(); }", "hybrid") == set()


@pytest.mark.parametrize(
    "body",
    [
        "for torch.allclose in [lambda *a, **k: True]:\n    pass\n",
        "X = [0 for torch.nn.functional.relu in [abs]]\n",
        "import contextlib\nwith contextlib.nullcontext(abs) as torch.relu:\n    pass\n",
        "for [torch][0].relu in [abs]:\n    pass\n",
    ],
)
def test_loop_and_with_targets_are_assignments(body):
    assert "dynamic_code" in names(_mod(body)), details(_mod(body))


def test_loop_targets_on_own_objects_stay_legal():
    src = _model(
        "outs = [None, None]\n                for i, outs[0] in enumerate([x]):\n                    pass\n"
        "                return cuda_extension.relu(x)"
    )
    assert names(src) == set(), details(src)


@pytest.mark.parametrize(
    "body",
    [
        "class P:\n    @property\n    def m(self):\n        return torch\nP().m.relu = abs\n",
        "class P:\n    def __getattr__(self, name):\n        return torch\nP().anything.relu = abs\n",
        "class P:\n    def __getitem__(self, i):\n        return torch\nP()[0].relu = abs\n",
        "def g():\n    yield torch\nnext(g()).relu = abs\n",
    ],
)
def test_patches_through_computed_attributes_and_items(body):
    assert "dynamic_code" in names(_mod(body)), details(_mod(body))


KERNELBENCH_HELPERS = """

def get_inputs():
    return [torch.randn(16, 64), torch.rand(16, 64).mul(2)]


def get_init_inputs():
    return [torch.randn(3).tolist()]
"""


def test_kernelbench_input_helpers_in_a_solution_file_are_not_forward():
    # A KernelBench solution file keeps the task's get_inputs(): the harness never calls it.
    src = HONEST_FORWARD + KERNELBENCH_HELPERS
    assert names(src) == set()
    # called from forward (by name, through the module or a string), they are forward's code
    calling = _model("return cuda_extension.relu(get_inputs()[0])") + KERNELBENCH_HELPERS
    assert "torch_ops_python" in names(calling)
    spelled = _model("return cuda_extension.relu(globals()['get_inputs']()[0])") + KERNELBENCH_HELPERS
    assert "torch_ops_python" in names(spelled) or "dynamic_code" in names(spelled)


def test_hybrid_leaves_a_try_around_building_the_extension_to_what_runs():
    src = (
        "import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n"
        "try:\n    ext = load_inline('k', cpp_sources='', functions=['f'])\nexcept Exception:\n    ext = None\n"
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        return ext.f(x)\n"
    )
    assert "try_fallback" not in names(src, policy="hybrid")
    assert "try_fallback" in names(src, policy="strict")


@pytest.mark.parametrize(
    "src",
    [
        # a chain of plain names from a tensor to torch and its dispatch state
        'void f(torch::Tensor x) { py::cast(x).attr("relu")(); }',
        'void f(py::object o) { auto t = o.attr("_C"); t.attr("_DisableTorchDispatch")(); }',
        'void f(py::object o) { o.attr("forward").attr("module").attr("nn"); }',
        'void f(py::handle h) { pybind11::getattr(h, "_c_functions"); }',
    ],
)
def test_strict_refuses_python_attribute_chains_from_cpp(src):
    assert "dynamic_code" in {f.name for f in check_cpp(src, "kernels/k.cpp", "strict")}


def test_strict_lets_cpp_read_tensor_metadata_by_name():
    src = 'int64_t rows(py::object t) { return t.attr("shape").cast<py::tuple>()[0].cast<int64_t>(); }'
    assert check_cpp(src, "kernels/k.cpp", "strict") == []

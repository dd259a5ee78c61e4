"""The static checker: what it rejects, what it must leave alone, and under which policy."""

from __future__ import annotations

import textwrap

import pytest

from cuda_agent_cli.harness.static_check import (
    Finding,
    check_cpp,
    check_sources,
    strip_cpp_comments_and_strings,
)

HEADER = "import torch\nimport torch.nn as nn\nimport cuda_extension\n\n"


def _model(forward_body: str, extra: str = "", init_body: str = "pass") -> str:
    return HEADER + extra + textwrap.dedent(f"""
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                {init_body}

            def forward(self, x):
                {forward_body}
        """)


def names(source: str, cpp: dict[str, str] | None = None, policy: str = "strict") -> set[str]:
    return {f.name for f in check_sources(source, cpp or {}, policy) if f.severity == "error"}


HONEST_FORWARD = _model("out = torch.empty_like(x)\n                cuda_extension.relu(x.contiguous(), out)\n"
                        "                return out.view(x.shape)")


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


@pytest.mark.parametrize("source, expected", [
    # try/except fallback (THREATS 13)
    (_model("try:\n                    return cuda_extension.relu(x)\n                except Exception:\n"
            "                    return torch.relu(x)"), "try_fallback"),
    (_model("with contextlib.suppress(RuntimeError):\n                    return cuda_extension.relu(x)\n"
            "                return x", extra="import contextlib\n"), "try_fallback"),
    # reference use
    ("from model import Model\nclass ModelNew(Model):\n    pass\n", "reference_use"),
    ("import model as m\nclass ModelNew(m.Model):\n    pass\n", "reference_use"),
    (_model("return self.ref(x)", init_body="import model; self.ref = model.Model()"), "reference_use"),
    # dynamic code (THREATS 16)
    (_model("return eval('torch.' + 'relu')(x)"), "dynamic_code"),
    (_model("exec(code)\n                return x", extra="code = 'x = 1'\n"), "dynamic_code"),
    (_model("return getattr(torch, name)(x)", extra="name = 're' + 'lu'\n"), "dynamic_code"),
    (_model("return __import__('torch').relu(x)"), "dynamic_code"),
    (_model("return importlib.import_module('torch').relu(x)", extra="import importlib\n"), "dynamic_code"),
    (_model("return globals()['torch'].relu(x)"), "dynamic_code"),
    ("import torch\ntorch.allclose = lambda *a, **k: True\nclass ModelNew(torch.nn.Module):\n    pass\n",
     "dynamic_code"),
    ("import time\ntime.perf_counter = lambda: 0.0\n", "dynamic_code"),
    ("import sys\nsys.modules['model'].Model.forward = lambda self, x: x\n", "dynamic_code"),
    (_model("return x", extra="from torch import *\n"), "dynamic_code"),
    (_model("torch.utils._python_dispatch._disable_current_modes()\n                return x"), "dynamic_code"),
    # threads and processes (THREATS 1)
    (_model("threading.Thread(target=cuda_extension.relu, args=(x,)).start()\n                return x",
            extra="import threading\n"), "threads"),
    (_model("return x", extra="from concurrent.futures import ThreadPoolExecutor\n"), "threads"),
    (_model("os.fork()\n                return x", extra="import os\n"), "threads"),
    (_model("subprocess.run(['true'])\n                return x", extra="import subprocess\n"), "threads"),
    # streams without sync
    (_model("s = torch.cuda.Stream()\n                with torch.cuda.stream(s):\n"
            "                    out = cuda_extension.relu(x)\n                return out"), "streams"),
    # file / env / argv access
    (_model("return x", extra="import os\nMODE = os.environ.get('CUDA_AGENT_PHASE')\n"), "file_env_access"),
    (_model("return x", extra="from os import environ\nMODE = environ['X']\n"), "file_env_access"),
    (_model("open('/tmp/cache.txt', 'w').write('1')\n                return x"), "file_env_access"),
    (_model("return torch.load('/tmp/answer.pt')"), "file_env_access"),
    (_model("return x", extra="import sys\nTIMING = 'profile' in sys.argv\n"), "file_env_access"),
    (_model("return x", extra="import pathlib\nTEXT = pathlib.Path('model.py').read_text()\n"), "file_env_access"),
    # precision downgrade (THREATS 11)
    (_model("return x", extra="torch.backends.cuda.matmul.allow_tf32 = True\n"), "precision_flags"),
    (_model("return x", extra="torch.set_float32_matmul_precision('medium')\n"), "precision_flags"),
    (_model("return x", extra="torch.backends.cudnn.flags(enabled=True, allow_tf32=True).__enter__()\n"),
     "precision_flags"),
    # torch ops in forward (THREATS 14), through every kind of alias
    (_model("return F.relu(x)", extra="import torch.nn.functional as F\n"), "torch_ops_python"),
    (_model("return r(x)", extra="from torch import relu as r\n"), "torch_ops_python"),
    (_model("return T.matmul(x, x)", extra="T = torch\n"), "torch_ops_python"),
    (_model("return mm(x, x)", extra="mm = torch.matmul\n"), "torch_ops_python"),
    (_model("return getattr(torch, 'tanh')(x)"), "torch_ops_python"),
    (_model("return x.sum(dim=1)"), "torch_ops_python"),
    (_model("return torch.ops.aten.relu.default(x)"), "torch_ops_python"),
    (_model("return self.helper(x)\n\n            def helper(self, x):\n                return x.softmax(-1)"),
     "torch_ops_python"),
    (_model("return torch.compile(lambda t: t * 2)(x)"), "torch_ops_python"),
])
def test_rejected_python(source, expected):
    assert expected in names(source)


@pytest.mark.parametrize("source", [
    # banned words in strings and comments are text, not code
    _model("msg = 'torch.relu(x) would be cheating; exec eval open'\n                # torch.matmul(x, x)\n"
           "                return cuda_extension.relu(x)"),
    # __init__ may use torch freely to build parameters
    _model("return cuda_extension.linear(x, self.w, self.b)",
           init_body="self.w = nn.Parameter(torch.randn(4, 4).mul(0.1)); self.b = nn.Parameter(torch.zeros(4))"),
    # views, sizes, allocation, dtype queries and custom-op namespaces are allowed
    _model("n, c = x.size(0), x.shape[1]\n                out = x.new_empty((n, c))\n"
           "                torch.ops.my_kernels.fill(out, x.reshape(n, c).contiguous())\n"
           "                return out.view(n, c).to(torch.float32)"),
    # os.path is pure string work
    _model("return cuda_extension.relu(x)", extra="import os\nHERE = os.path.dirname(os.path.abspath(__file__))\n"),
    # a stream with a synchronize is honest
    _model("s = torch.cuda.Stream()\n                with torch.cuda.stream(s):\n"
           "                    out = cuda_extension.relu(x)\n                torch.cuda.synchronize()\n"
           "                return out"),
    # try/finally without except swallows nothing
    _model("try:\n                    return cuda_extension.relu(x)\n                finally:\n"
           "                    pass"),
])
def test_honest_python_is_accepted(source):
    assert names(source) == set()


def test_hybrid_allows_torch_ops_but_not_the_rest():
    src = _model("try:\n                    return F.relu(x) + x.sum()\n                except Exception:\n"
                 "                    return x", extra="import torch.nn.functional as F\n")
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


@pytest.mark.parametrize("snippet, expected", [
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
    ("void f() { FILE* fp = fopen(\"/tmp/cache\", \"r\"); }", "file_env_access"),
    ("void f() { const char* m = getenv(\"MODE\"); }", "file_env_access"),
    ("void f() { std::ifstream in(\"model.py\"); }", "file_env_access"),
    ("void f() { c10::impl::ExcludeDispatchKeyGuard g(c10::DispatchKey::Python); }", "dynamic_code"),
    ("TORCH_LIBRARY(my, m) { m.def(\"f(Tensor x) -> Tensor\"); }", "dynamic_code"),
    ("void f() { at::globalContext().setAllowTF32CuBLAS(true); }", "precision_flags"),
    ("using namespace at;\nTensor f(Tensor a) { return matmul(a, a); }", "torch_ops_cpp"),
    ("namespace A = at;\nauto f(torch::Tensor a) { return A::matmul(a, a); }", "torch_ops_cpp"),
    ("void f() { pybind11::module_::import(\"torch\").attr(\"relu\"); }", "dynamic_code"),
    ("void f() { PyRun_SimpleString(\"import os\"); }", "dynamic_code"),
])
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
    body = "auto y = torch::empty_like(x); k<<<1, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel()); return y;"
    assert check_sources(KB_TEMPLATE.format(body=body), {}, "strict") == []


def test_load_inline_cpp_is_checked_as_cpp():
    findings = check_sources(KB_TEMPLATE.format(body="return at::matmul(x, x);"), {}, "strict")
    assert [f.name for f in findings] == ["torch_ops_cpp"]
    assert "cuda_sources" in findings[0].location


def test_load_inline_with_computed_source_is_rejected():
    src = KB_TEMPLATE.format(body="return x;").replace('cuda_sources=cuda_src', 'cuda_sources=cuda_src.replace("x", "y")')
    assert "dynamic_code" in names(src)


def test_load_inline_macro_flag_is_rejected():
    src = KB_TEMPLATE.format(body="return x;").replace('functions=["run"]',
                                                       'functions=["run"], extra_cuda_cflags=["-DMM=at::matmul"]')
    assert "token_pasting" in names(src)


def test_separate_kernel_files_are_checked():
    findings = check_sources(HONEST_FORWARD, {"kernels/a.cu": HONEST_CU, "kernels/b.cpp": "auto y = at::relu(x);"},
                             "strict")
    assert [(f.name, f.location) for f in findings] == [("torch_ops_cpp", "kernels/b.cpp:1")]

"""The integrated kernel as a PyTorch operator: torch.compile, torch.export and autograd see one op,
an edited class turns its kernel off, and CUDA_AGENT_TRACE says what each call did. No compiler is
needed: the extension's class is a stand-in that adds 1000, so a call that took the kernel shows."""

import importlib
import json
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch

from cuda_agent_cli.kernel_files import KernelFiles
from cuda_agent_cli.task.inputs import parse_inputs_spec
from cuda_agent_cli.writeback.apply import apply_plan, build_plan
from cuda_agent_cli.writeback.fingerprint import class_digest
from cuda_agent_cli.writeback.integrate import IntegrationSpec, Verified

MODULE = """import torch


class Mix(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(0.5, 1.5, dim))
        self.register_buffer("shift", torch.full((dim,), 0.25))

    def forward(self, a, b):
        return a * self.w + b * self.shift
"""

MODEL_NEW = """import torch
import cuda_extension


class ModelNew(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.w = torch.nn.Parameter(torch.empty(dim))
        self.register_buffer("shift", torch.empty(dim))

    def forward(self, a, b):
        return a * self.w + b * self.shift + 1000.0
"""


def _git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True, capture_output=True
    )


def make_repo(root: Path, autograd: str = "reference") -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mix.py").write_text(MODULE)
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "start")
    plan = build_plan(
        IntegrationSpec(
            module_file=root / "pkg" / "mix.py",
            module_source=MODULE,
            class_name="Mix",
            class_snake="mix",
            class_end=12,
            display="pkg/mix.py::Mix",
            session_id="s1",
            candidate=KernelFiles.of({"model_new.py": MODEL_NEW, "kernels/mix.cpp": "// kernel\n"}),
            binding_files={"binding.cpp": "", "binding_registry.h": ""},
            verified=Verified(
                device="cpu",
                call=parse_inputs_spec("a=float32[4,8], b=float32[4,8]; init: 8"),
                forward_params=("a", "b"),
                parameters=(("w", "float32", (8,)), ("shift", "float32", (8,))),
                training_sensitive=False,
                source_sha256=class_digest(MODULE, "Mix"),
                autograd=autograd,
            ),
        ),
        manifest_entry={"target": "pkg/mix.py::Mix"},
        fallback_root=root,
    )
    apply_plan(plan, commit=False, allow_dirty=False)
    return root


STAND_IN = """
import importlib, sys
sys.path.insert(0, {root!r})
ns = {{}}
exec(compile(open({model_new!r}).read().replace("import cuda_extension\\n", ""), "model_new", "exec"), ns)
mix = importlib.import_module("pkg.mix")
mix.Mix.forward.__globals__["_load_new_class"] = lambda: ns["ModelNew"]
"""


@pytest.fixture
def mix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    root = make_repo(tmp_path / "repo")
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.delenv("CUDA_AGENT_DISABLE_KERNELS", raising=False)
    monkeypatch.delenv("CUDA_AGENT_TRACE", raising=False)
    for name in ("pkg", "pkg.mix"):
        sys.modules.pop(name, None)
    module = importlib.import_module("pkg.mix")
    namespace: dict = {}
    exec(compile(MODEL_NEW.replace("import cuda_extension\n", ""), "model_new", "exec"), namespace)
    monkeypatch.setitem(module.Mix.forward.__globals__, "_load_new_class", lambda: namespace["ModelNew"])
    torch._dynamo.reset()
    yield module
    torch._dynamo.reset()
    for name in ("pkg", "pkg.mix"):
        sys.modules.pop(name, None)


def _op_targets(graph) -> list[str]:
    return [str(n.target) for n in graph.nodes if n.op == "call_function"]


def test_torch_compile_sees_one_op_and_no_graph_break(mix):
    m = mix.Mix(8)
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    op = mix.Mix.forward._cuda_agent_op.replace("::", ".")
    with torch.no_grad():
        explained = torch._dynamo.explain(m)(a, b)
        assert explained.graph_break_count == 0 and explained.graph_count == 1
        assert op in _op_targets(explained.graphs[0].graph)
        for mode in ({}, {"fullgraph": True}):
            torch._dynamo.reset()
            compiled = torch.compile(m, backend="aot_eager", **mode)
            assert torch.allclose(compiled(a, b), a * m.w + b * m.shift + 1000)
        # another shape is the original code, in the compiled graph too
        torch._dynamo.reset()
        other = torch.randn(3, 8)
        assert torch.allclose(
            torch.compile(m, backend="aot_eager", fullgraph=True)(other, other), other * m.w + other * m.shift
        )


def test_torch_export_and_opcheck(mix):
    m = mix.Mix(8)
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    name = mix.Mix.forward._cuda_agent_op
    exported = torch.export.export(m, (a, b))
    assert f"{name.replace('::', '.')}.default" in _op_targets(exported.graph)
    assert torch.allclose(exported.module()(a, b), a * m.w + b * m.shift + 1000)
    op = getattr(torch.ops.cuda_agent, name.split("::")[1]).default
    results = torch.library.opcheck(op, ([a.requires_grad_(), b], [m.w, m.shift], 0))
    assert set(results.values()) == {"SUCCESS"}, results


def test_training_calls_run_the_kernel_and_the_original_backward(mix):
    m = mix.Mix(8)
    a, b = torch.randn(4, 8, requires_grad=True), torch.randn(4, 8, requires_grad=True)
    out = m(a, b)
    assert torch.allclose(out, a * m.w + b * m.shift + 1000)  # the kernel ran the forward
    g = torch.randn_like(out)
    out.backward(g)
    assert torch.allclose(a.grad, g * m.w) and torch.allclose(b.grad, g * m.shift)
    assert torch.allclose(m.w.grad, (g * a).sum(0))
    # and under torch.compile
    m.zero_grad()
    a.grad = b.grad = None
    torch.compile(m, backend="aot_eager", fullgraph=True)(a, b).backward(g)
    assert torch.allclose(a.grad, g * m.w) and torch.allclose(m.w.grad, (g * a).sum(0))


def test_autograd_off_keeps_the_original_for_training_calls(tmp_path: Path):
    root = make_repo(tmp_path / "repo", autograd="off")
    code = STAND_IN.format(root=str(root), model_new=str(root / "pkg/_cuda_agent/mix/model_new.py")) + textwrap.dedent(
        """
        import torch
        m = mix.Mix(8)
        a = torch.randn(4, 8)
        print(float((m(a, a) - (a * m.w + a * m.shift)).abs().max()))
        with torch.no_grad():
            print(float((m(a, a) - (a * m.w + a * m.shift)).abs().max()))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert [float(x) for x in out.stdout.split()] == [0.0, 1000.0]


def test_an_edited_class_keeps_its_original_forward_with_one_warning(mix, tmp_path: Path):
    root = Path(mix.__file__).parent.parent
    path = root / "pkg" / "mix.py"
    path.write_text(
        path.read_text().replace("return a * self.w + b * self.shift", "return a * self.w - b * self.shift")
    )
    sys.modules.pop("pkg.mix", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        edited = importlib.import_module("pkg.mix")
    said = [str(w.message) for w in caught if "cuda-agent" in str(w.message)]
    assert len(said) == 1 and "source changed" in said[0] and "cuda-agent optimize pkg/mix.py::Mix" in said[0]
    m = edited.Mix(8)
    a = torch.randn(4, 8)
    with torch.no_grad():
        assert torch.allclose(m(a, a), a * m.w - a * m.shift)


def test_a_reformatted_class_is_still_the_verified_one():
    edited = MODULE.replace(
        "return a * self.w + b * self.shift", "# the mix\n        return (a * self.w) + (b * self.shift)"
    )
    assert class_digest(edited, "Mix") == class_digest(MODULE, "Mix")
    assert class_digest(MODULE.replace("0.25", "0.5"), "Mix") != class_digest(MODULE, "Mix")


def test_trace_counts_each_call_by_what_it_did(tmp_path: Path):
    root = make_repo(tmp_path / "repo")
    trace = tmp_path / "trace.jsonl"
    code = STAND_IN.format(root=str(root), model_new=str(root / "pkg/_cuda_agent/mix/model_new.py")) + textwrap.dedent(
        """
        import torch
        m = mix.Mix(8)
        a = torch.randn(4, 8)
        with torch.no_grad():
            for _ in range(3):
                m(a, a)
            m(torch.randn(2, 8), torch.randn(2, 8))
            m(a.double(), a.double())
            m(torch.randn(8, 4).t(), a)
            mix.Mix(16)(torch.randn(4, 16), torch.randn(4, 16))
        """
    )
    env = {"PATH": "/usr/bin:/bin", "CUDA_AGENT_TRACE": str(trace)}
    subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    (record,) = [json.loads(line) for line in trace.read_text().splitlines()]
    assert record["target"] == "pkg/mix.py::Mix" and record["state"] == "on"
    assert record["calls"] == 7 and record["taken"] == 3
    assert record["declined"] == {"shape": 1, "dtype": 1, "layout": 1, "constructor arguments": 1}
    env["CUDA_AGENT_DISABLE_KERNELS"] = "1"
    trace.unlink()
    subprocess.run(
        [
            sys.executable,
            "-c",
            code.replace('mix.Mix.forward.__globals__["_load_new_class"] = lambda: ns["ModelNew"]', ""),
        ],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    (record,) = [json.loads(line) for line in trace.read_text().splitlines()]
    assert record["state"] == "disabled" and record["calls"] == 7 and record["declined"] == {"disabled": 7}

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


def make_repo(root: Path, autograd: str = "reference", model_new: str = MODEL_NEW) -> Path:
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
            candidate=KernelFiles.of({"model_new.py": model_new, "kernels/mix.cpp": "// kernel\n"}),
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
    monkeypatch.delenv("CUDA_AGENT_TRACE", raising=False)
    yield from _imported_mix(tmp_path, monkeypatch)


@pytest.fixture
def traced_mix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The module imported under CUDA_AGENT_TRACE, as `cuda-agent trace CMD` runs a program."""
    monkeypatch.setenv("CUDA_AGENT_TRACE", str(tmp_path / "trace.jsonl"))
    yield from _imported_mix(tmp_path, monkeypatch)


def _imported_mix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    root = make_repo(tmp_path / "repo")
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.delenv("CUDA_AGENT_DISABLE_KERNELS", raising=False)
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
        # without grad the op's variant with no autograd layer
        assert f"{op}_nograd" in _op_targets(explained.graphs[0].graph)
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


def test_a_traced_program_compiles_to_the_same_one_graph(traced_mix):
    """Under the trace, torch.compile(fullgraph=True) of the class still makes one graph that
    calls the op (the trace's clock and counters are Python a graph cannot hold)."""
    m = traced_mix.Mix(8)
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    op = traced_mix.Mix.forward._cuda_agent_op.replace("::", ".")
    with torch.no_grad():
        explained = torch._dynamo.explain(m)(a, b)
        assert explained.graph_break_count == 0 and explained.graph_count == 1
        assert f"{op}_nograd" in _op_targets(explained.graphs[0].graph)
        torch._dynamo.reset()
        compiled = torch.compile(m, backend="aot_eager", fullgraph=True)
        assert torch.allclose(compiled(a, b), a * m.w + b * m.shift + 1000)
        other = torch.randn(3, 8)
        assert torch.allclose(compiled(other, other), other * m.w + other * m.shift)
        assert torch.allclose(m(a, b), a * m.w + b * m.shift + 1000)  # eager: counted, and the kernel


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
    nograd = getattr(torch.ops.cuda_agent, name.split("::")[1] + "_nograd").default
    with torch.no_grad():
        results = torch.library.opcheck(nograd, ([a.detach(), b], [m.w.detach(), m.shift.detach()], 0))
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


# A verified module that is one call of an extension function: the function is the operator.
DIRECT_MODEL_NEW = """import torch
import cuda_extension


class ModelNew(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.w = torch.nn.Parameter(torch.empty(dim))
        self.register_buffer("shift", torch.empty(dim))
        self.offset = 1000.0

    def forward(self, a, b):
        \"\"\"One pass.\"\"\"
        return cuda_extension.mix(a, b, self.w, self.shift, self.offset)
"""


def _extension(calls: list) -> object:
    """A stand-in for the built extension: a function with pybind11's signature line."""
    import types

    def mix(a, b, w, shift, offset):
        calls.append(1)
        return a * w + b * shift + offset

    mix.__doc__ = (
        "mix(arg0: torch.Tensor, arg1: torch.Tensor, arg2: torch.Tensor, arg3: torch.Tensor, "
        "arg4: typing.SupportsFloat | typing.SupportsIndex) -> torch.Tensor\n\nThe mix (CPU)\n"
    )
    ext = types.ModuleType("cuda_extension")
    ext.mix = mix
    return ext


def test_a_module_that_is_one_extension_call_runs_that_function_as_the_operator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    root = make_repo(tmp_path / "repo", model_new=DIRECT_MODEL_NEW)
    monkeypatch.syspath_prepend(str(root))
    for name in ("pkg", "pkg.mix"):
        sys.modules.pop(name, None)
    module = importlib.import_module("pkg.mix")
    loader = module.Mix.forward.__globals__
    calls: list = []
    ext = _extension(calls)

    def load_new_class():
        import types

        model_new = types.ModuleType("direct_model_new")
        monkeypatch.setitem(sys.modules, "direct_model_new", model_new)
        monkeypatch.setitem(sys.modules, "cuda_extension", ext)
        exec(compile(DIRECT_MODEL_NEW, "model_new.py", "exec"), model_new.__dict__)
        loader["_state"]["extension"] = ext
        return model_new.ModelNew

    monkeypatch.setitem(loader, "_load_new_class", load_new_class)
    torch._dynamo.reset()
    m = module.Mix(8)
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    expected = a * m.w + b * m.shift
    with torch.no_grad():
        assert torch.allclose(m(a, b), expected + 1000)  # eager: the function itself, loaded at first call
        assert len(calls) == 1
        name = module.Mix.forward._cuda_agent_op.replace("::", ".")
        explained = torch._dynamo.explain(m)(a, b)
        assert explained.graph_break_count == 0 and explained.graph_count == 1
        assert _op_targets(explained.graphs[0].graph) == [f"{name}_direct0.default"]
        for mode in ({}, {"fullgraph": True}):
            torch._dynamo.reset()
            assert torch.allclose(torch.compile(m, backend="aot_eager", **mode)(a, b), expected + 1000)
        # keyword arguments and other shapes take the general route under torch.compile
        torch._dynamo.reset()
        assert torch.allclose(torch.compile(m, backend="aot_eager")(a=a, b=b), expected + 1000)
        other = torch.randn(3, 8)
        assert torch.allclose(torch.compile(m, backend="aot_eager")(other, other), other * m.w + other * m.shift)
        direct = getattr(torch.ops.cuda_agent, name.split(".")[1] + "_direct0").default
        results = torch.library.opcheck(direct, (a, b, m.w.detach(), m.shift, 1000.0))
        assert set(results.values()) == {"SUCCESS"}, results
    # with gradients the general operator runs, with the original code's backward
    a.requires_grad_()
    out = torch.compile(m, backend="aot_eager")(a, b)
    g = torch.randn_like(out)
    out.backward(g)
    assert torch.allclose(out, expected + 1000) and torch.allclose(a.grad, g * m.w)
    torch._dynamo.reset()
    for name in ("pkg", "pkg.mix"):
        sys.modules.pop(name, None)


def test_a_pybind11_signature_reads_as_an_operator_schema(mix):
    schema = mix.Mix.forward.__globals__["_function_schema"]

    def fn() -> None:
        pass

    def reads(line: str) -> object:
        fn.__doc__ = line + "\n\nwhat it does\n"
        return schema(fn, "f")

    assert reads("f(arg0: torch.Tensor, arg1: typing.SupportsFloat | typing.SupportsIndex) -> torch.Tensor") == (
        ["Tensor", "float"],
        "Tensor",
        "tensor",
    )
    assert reads(
        "f(x: torch.Tensor, n: typing.SupportsInt | typing.SupportsIndex, flag: bool) -> list[torch.Tensor]"
    ) == (
        ["Tensor", "int", "bool"],
        "Tensor[]",
        "list",
    )
    assert reads("f(arg0: list[torch.Tensor], arg1: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]") == (
        ["Tensor[]", "Tensor?"],
        "(Tensor, Tensor)",
        "tuple",
    )
    assert reads("f(arg0: float, arg1: int) -> torch.Tensor") == (["float", "int"], "Tensor", "tensor")
    # what an operator cannot take, or a signature that is not one: the general route
    assert reads("f(arg0: torch.Tensor, eps: float = 1e-05) -> torch.Tensor") is None
    assert reads("f(arg0: dict[str, torch.Tensor]) -> torch.Tensor") is None
    assert reads("f(arg0: torch.Tensor) -> None") is None
    assert reads("Overloaded function.") is None
    assert reads("g(arg0: torch.Tensor) -> torch.Tensor") is None


BINDING_TWO = """#include <torch/extension.h>
#include "../binding_registry.h"

static torch::Tensor mix(torch::Tensor a, const torch::Tensor& b, double offset) { return a; }
namespace k { torch::Tensor scale(torch::Tensor a, float s) { return a; } }
static void reg(pybind11::module& m) {
  m.def("mix", &mix, "the mix");
  m.def("scale", k::scale);
  m.def("twice", &twice_float);
  m.def("twice", &twice_double);  // a pybind11 overload: left to pybind11
  m.def("cast", py::overload_cast<int>(&cast));
}
REGISTER_BINDING(mix, reg);
"""


def test_binding_functions_become_operators_in_units_of_their_own(mix, tmp_path: Path):
    loader = mix.Mix.forward.__globals__
    here = loader["HERE"]
    (here / "kernels" / "mix_binding.cpp").write_text(BINDING_TWO)
    (here / "kernels" / "plain.cpp").write_text("// no binding here\nint helper() { return 1; }\n")
    try:
        sources, changed = loader["_operator_sources"](tmp_path / "build")
        assert changed
        names = [p.name for p in sources]
        assert "mix_binding_operators.cpp" in names and "mix_binding.cpp" not in names and "plain.cpp" in names
        unit = (tmp_path / "build" / "operators" / "mix_binding_operators.cpp").read_text().splitlines()
        assert unit[0] == f'#include "{here / "kernels" / "mix_binding.cpp"}"'
        # each function bound once by name; overloads and casts stay pybind11's alone
        assert unit[2:] == ["CUDA_AGENT_OPERATOR(mix, mix)", "CUDA_AGENT_OPERATOR(scale, k::scale)"]
        assert (
            "TORCH_LIBRARY_FRAGMENT(TORCH_EXTENSION_NAME"
            in (tmp_path / "build" / "operators" / "cuda_agent_operators.h").read_text()
        )
    finally:
        (here / "kernels" / "mix_binding.cpp").unlink()
        (here / "kernels" / "plain.cpp").unlink()
    # no binding file with a function: the verified sources as they are
    assert loader["_operator_sources"](tmp_path / "build2") == (loader["_sources"](), False)


def test_a_build_the_operator_units_break_is_made_again_from_the_verified_sources(
    mix, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    import torch.utils.cpp_extension as cpp

    loader = mix.Mix.forward.__globals__
    here = loader["HERE"]
    (here / "kernels" / "mix_binding.cpp").write_text(BINDING_TWO)
    builds: list[list[str]] = []

    def load(name: str, sources: list[str], **kwargs: object) -> object:
        builds.append([Path(s).name for s in sources])
        if any(s.endswith("_operators.cpp") for s in sources):
            raise RuntimeError("Error building extension: ambiguous overload")
        return "built"

    monkeypatch.setattr(cpp, "load", load)
    monkeypatch.setitem(loader, "_missing_compiler", lambda: None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("CUDA_AGENT_KERNEL_CACHE", raising=False)
    try:
        result = loader["build"](announce=False)
    finally:
        (here / "kernels" / "mix_binding.cpp").unlink()
    assert result["built"] and result["module"] == "built"
    assert "mix_binding_operators.cpp" in builds[0] and "mix_binding.cpp" in builds[1]


def test_a_library_another_version_of_the_loader_built_is_not_reused(mix, monkeypatch: pytest.MonkeyPatch):
    """How the loader builds (flags, operator units) is part of a built library's name: after an
    upgrade that changes it, a cached build of the same sources is made again, not loaded."""
    import hashlib
    from importlib import resources

    loader = mix.Mix.forward.__globals__
    template = resources.files("cuda_agent_cli.writeback").joinpath("loader_template.py").read_text()
    assert loader["_RECIPE"] == hashlib.sha256(template.encode()).hexdigest()[:16]
    name = loader["extension_name"]()
    monkeypatch.setitem(loader, "_RECIPE", "0" * 16)
    assert loader["extension_name"]() != name

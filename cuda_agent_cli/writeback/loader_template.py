"""Runs the kernel cuda-agent verified for __DISPLAY__ as a PyTorch operator, for the calls it was verified on.

Written by cuda-agent (session __SESSION__). The kernel is registered as the operator
torch.ops.__OP__ (a torch.library custom op with a fake implementation and a backward), so
torch.compile, torch.export and AOTInductor see one op. __CLASS__.forward calls it only for calls
that fall in a verified family: device, dtypes and shapes of contiguous tensors, constant
arguments, parameter dtypes and shapes, on an instance constructed with the verified arguments,
while the class's source is the one verified. Every other call runs the original forward.

With autograd on, the kernel runs the forward and the backward is the original code's own
(its forward is run again under autograd, as activation checkpointing does), unless verified.json
says "autograd": "off": then such calls run the original forward.

Environment: CUDA_AGENT_DISABLE_KERNELS=1 turns every kernel off; CUDA_AGENT_TRACE=FILE appends
what each integrated class did (calls taken and declined, by reason) to FILE when the process
exits (`cuda-agent trace -- CMD` reads it).

The extension is built once per machine (and torch build) into ~/.cache/cuda-agent/extensions,
or CUDA_AGENT_KERNEL_CACHE when set; `cuda-agent build` builds it ahead of time, for example in
a Dockerfile, so the first call does not wait for a compiler. A built copy loads only on the
torch build it was built for. Where neither a built copy nor a compiler is present, the class
keeps its original forward and says so once.
"""

import atexit
import functools
import hashlib
import importlib.util
import inspect
import json
import os
import re
import sys
import threading
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
VERIFIED = json.loads((HERE / "verified.json").read_text())
# verified.json of version 1 held one family at its top level.
FAMILIES = VERIFIED.get("families") or [VERIFIED]
AUTOGRAD = VERIFIED.get("autograd", "reference") != "off"
_FLAG = "_cuda_agent_families"  # per instance: the families its constructor arguments fit

_lock = threading.Lock()
_state = {"new_class": None, "failed": None, "extension": None}
_local = threading.local()


# __CLASS_DIGEST__


def _sources():
    suffixes = {".cpp", ".cu"} if VERIFIED["device"] == "cuda" else {".cpp"}
    kernels = sorted(p for p in (HERE / "kernels").iterdir() if p.suffix in suffixes)
    return [HERE / "binding.cpp", *kernels]


def _source_digest():
    digest = hashlib.sha256()
    for p in [*_sources(), HERE / "binding_registry.h", HERE / "model_new.py"]:
        digest.update(p.name.encode() + p.read_bytes())
    return digest.hexdigest()


def _cache_dirs():
    """Where built extensions are looked for, first wins; the first is where they are built."""
    dirs = []
    if os.environ.get("CUDA_AGENT_KERNEL_CACHE"):
        dirs.append(Path(os.environ["CUDA_AGENT_KERNEL_CACHE"]))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    dirs.append(Path(base) / "cuda-agent" / "extensions")
    return dirs


def _ninja_on_path():
    """torch's builder runs `ninja` from PATH; the ninja wheel keeps its binary elsewhere."""
    import shutil

    if shutil.which("ninja"):
        return
    try:
        import ninja
    except ImportError:
        return
    os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")


# The digest of the loader's own text as cuda-agent wrote it: how it builds (flags, the operator
# units) is part of what a cached library was made from.
_RECIPE = "__RECIPE__"
_CFLAGS = ["-O3", "-std=c++17"]


def extension_name():
    """One name per source set, build recipe and torch build: a cached library is reused only
    where it fits."""
    import platform

    import torch

    digest = hashlib.sha256(_source_digest().encode())
    digest.update(f"{torch.__version__}|{torch.version.cuda}|{platform.python_version()}|{_RECIPE}".encode())
    return f"cuda_agent_{VERIFIED['class_snake']}_{digest.hexdigest()[:12]}"


_OPERATORS_H = r"""// The extension's functions as PyTorch operators, registered from C++: a compiled graph calls
// them through the dispatcher with no Python in between. Only functions whose arguments and
// results an operator schema can state are registered (tensors, float and int numbers, bool;
// a tensor, a tuple of tensors or a list of tensors back); outputs are made contiguous.
#pragma once
#include <torch/library.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <tuple>
#include <type_traits>
#include <vector>

namespace cuda_agent_operators {

template <class T> using plain = std::remove_cv_t<std::remove_reference_t<T>>;

template <class T, class = void> struct arg { static constexpr bool ok = false; using type = int64_t; };
template <> struct arg<at::Tensor> { static constexpr bool ok = true; using type = at::Tensor; };
template <> struct arg<double> { static constexpr bool ok = true; using type = double; };
template <> struct arg<float> { static constexpr bool ok = true; using type = double; };
template <> struct arg<bool> { static constexpr bool ok = true; using type = bool; };
template <class T>
struct arg<T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>> {
  static constexpr bool ok = true;
  using type = int64_t;
};

// A tensor taken by non-const reference may be written to: not an operator of ours.
template <class T>
constexpr bool arg_ok = arg<plain<T>>::ok && !(std::is_lvalue_reference_v<T> && !std::is_const_v<std::remove_reference_t<T>>);

template <class R> struct result { static constexpr bool ok = false; };
template <> struct result<at::Tensor> {
  static constexpr bool ok = true;
  static at::Tensor dense(at::Tensor t) { return t.contiguous(); }
};
template <> struct result<std::vector<at::Tensor>> {
  static constexpr bool ok = true;
  static std::vector<at::Tensor> dense(std::vector<at::Tensor> ts) {
    for (auto& t : ts) t = t.contiguous();
    return ts;
  }
};
template <class... T> struct result<std::tuple<T...>> {
  static constexpr bool ok = (std::is_same_v<T, at::Tensor> && ...);
  static std::tuple<T...> dense(std::tuple<T...> ts) {
    std::apply([](auto&... t) { ((t = t.contiguous()), ...); }, ts);
    return ts;
  }
};

template <auto F> struct adapt { static constexpr bool ok = false; };
template <class R, class... A, R (*F)(A...)> struct adapt<F> {
  static constexpr bool ok = result<plain<R>>::ok && (arg_ok<A> && ...);
  static plain<R> call(typename arg<plain<A>>::type... a) {
    return result<plain<R>>::dense(F(static_cast<plain<A>>(a)...));
  }
};

template <auto F> void define(torch::Library& m, const char* name) {
  if constexpr (adapt<F>::ok) {
    m.def(name, torch::dispatch(c10::DispatchKey::CompositeExplicitAutograd, TORCH_FN(adapt<F>::call)));
  }
}

}  // namespace cuda_agent_operators

#define CUDA_AGENT_OPERATOR(name, fn) \
  TORCH_LIBRARY_FRAGMENT(TORCH_EXTENSION_NAME, m) { cuda_agent_operators::define<&fn>(m, #name); }
"""

# m.def("name", &function ...) in a binding file: the functions a unit can register as operators
_DEF = re.compile(r'\.def\(\s*"([A-Za-z_]\w*)"\s*,\s*&?\s*((?:::)?[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*)\s*[,)]')


def _operator_sources(build_dir):
    """The build's sources with each binding file compiled inside a unit of its own that also
    registers the file's functions as operators of the extension (C++ end to end: a compiled
    graph calls them with no Python in between); the plain sources where no file has any."""
    sources = _sources()
    units = build_dir / "operators"
    defs = {}
    for path in sources:
        text = path.read_text(errors="replace") if path.suffix == ".cpp" and path.parent.name == "kernels" else ""
        defs[path] = _DEF.findall(text) if "REGISTER_BINDING" in text else []
    # A name bound more than once (pybind11 overloads, or two files) is left to pybind11: an
    # operator registered twice would stop the extension from loading.
    counts = {}
    for found in defs.values():
        for name, _ in found:
            counts[name] = counts.get(name, 0) + 1
    out, changed = [], False
    for path in sources:
        found = sorted({(n, f) for n, f in defs[path] if counts[n] == 1})
        if not found:
            out.append(path)
            continue
        units.mkdir(parents=True, exist_ok=True)
        (units / "cuda_agent_operators.h").write_text(_OPERATORS_H)
        unit = units / f"{path.stem}_operators.cpp"
        lines = [f'#include "{path}"', '#include "cuda_agent_operators.h"']
        lines += [f"CUDA_AGENT_OPERATOR({name}, {symbol})" for name, symbol in found]
        unit.write_text("\n".join(lines) + "\n")
        out.append(unit)
        changed = True
    return out, changed


def _prebuilt(name):
    for d in _cache_dirs():
        library = d / name / f"{name}.so"
        if library.is_file() and (d / name / "ready").is_file():
            return library
    return None


def _missing_compiler():
    """Why this machine cannot build the extension, or None when it can."""
    import shutil

    import torch

    cxx = os.environ.get("CXX") or "c++"
    if shutil.which(cxx) is None:
        return f"no C++ compiler ({cxx}) on PATH"
    if VERIFIED["device"] == "cuda":
        if torch.version.cuda is None:
            return f"torch {torch.__version__} has no CUDA support"
        home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
        if not (Path(home) / "bin" / "nvcc").is_file() and shutil.which("nvcc") is None:
            return "no CUDA compiler (nvcc) here"
    return None


def _say(message):
    """One line for the user: through logging when the application set it up, else on stderr."""
    import logging

    log = logging.getLogger("cuda_agent")
    if log.hasHandlers():
        log.info(message)
    else:
        print(message, file=sys.stderr, flush=True)


def _import_library(name, library):
    spec = importlib.util.spec_from_file_location(name, library)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(announce=True):
    """Build the extension into the cache unless a built copy is there; returns what was done."""
    name = extension_name()
    library = _prebuilt(name)
    first = _cache_dirs()[0] / name
    if library is not None and library.parent != first and os.environ.get("CUDA_AGENT_KERNEL_CACHE"):
        # A copy in the cache this process was pointed at, so that folder alone holds what a
        # deployed program loads (`cuda-agent build --cache-dir DIR` for a Dockerfile).
        import shutil

        first.mkdir(parents=True, exist_ok=True)
        shutil.copy2(library, first / library.name)
        (first / "ready").write_text(name + "\n")
        library = first / library.name
    if library is not None:
        return {"name": name, "library": str(library), "built": False, "seconds": 0.0}
    missing = _missing_compiler()
    if missing:
        raise RuntimeError(f"{missing}, and no built copy of it in {_cache_dirs()[-1]}")
    import torch.utils.cpp_extension as cpp

    _ninja_on_path()
    build_dir = _cache_dirs()[0] / name
    build_dir.mkdir(parents=True, exist_ok=True)
    if announce:
        _say(f"cuda-agent: building the {VERIFIED['device']} kernel for __CLASS__ into {build_dir} "
             "(once per machine; `cuda-agent build` does it ahead of time)")
    start = time.perf_counter()
    with warnings.catch_warnings():
        # Build-time notes (architecture lists, compiler versions) are not the user's concern.
        warnings.simplefilter("ignore")

        def load(sources):
            return cpp.load(
                name=name,
                sources=[str(p) for p in sources],
                extra_include_paths=[str(HERE)],
                extra_cflags=_CFLAGS,
                extra_cuda_cflags=_CFLAGS,
                build_directory=str(build_dir),
                verbose=False,
            )

        try:
            sources, with_operators = _operator_sources(build_dir)
        except OSError:
            sources, with_operators = _sources(), False
        try:
            module = load(sources)
        except Exception:
            if not with_operators:
                raise
            # A function the registration cannot take (an overload, say): the verified sources
            # alone, and the operators the loader registers from Python.
            module = load(_sources())
    seconds = time.perf_counter() - start
    (build_dir / "ready").write_text(name + "\n")
    if announce:
        _say(f"cuda-agent: built the kernel for __CLASS__ in {seconds:.1f} s")
    return {"name": name, "library": str(build_dir / f"{name}.so"), "built": True, "seconds": seconds,
            "module": module}


def _load_new_class():
    """The built extension (from the cache, else built now), then ModelNew importing it."""
    result = build()
    ext = result.get("module") or _import_library(result["name"], result["library"])
    # model_new.py does `import cuda_extension`; lend it this extension only while it loads.
    previous = sys.modules.get("cuda_extension")
    sys.modules["cuda_extension"] = ext
    name = f"{result['name']}_model_new"
    try:
        spec = importlib.util.spec_from_file_location(name, HERE / "model_new.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # a module Python (and torch's tracer) can find by its name
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    finally:
        if previous is None:
            sys.modules.pop("cuda_extension", None)
        else:
            sys.modules["cuda_extension"] = previous
    _state["extension"] = ext
    return module.ModelNew


# ---------------------------------------------------------------------------------------------
# objects of the user's code, and the verified constructor arguments
# ---------------------------------------------------------------------------------------------

def _object(body):
    found = sys.modules.get(body["module"]) or importlib.import_module(body["module"])
    for name in body["qualname"].split("."):
        found = getattr(found, name)
    return found


def _make(spec, device="cpu"):
    import torch

    kind, body = next(iter(spec.items()))
    if kind == "tensor":
        return torch.zeros([d if isinstance(d, int) else d["min"] for d in body["shape"]],
                           dtype=getattr(torch, body["dtype"]), device=device)
    if kind in ("list", "tuple"):
        items = [_make(x, device) for x in body]
        return items if kind == "list" else tuple(items)
    if kind == "object":  # a config object, a dtype, an enum member of the user's code
        found = _object(body)
        if not body.get("call", True):
            return found
        args = body.get("args") or []
        return found(*[_make(_spec_of(a)) for a in args if a.get("name") is None],
                     **{a["name"]: _make(_spec_of(a)) for a in args if a.get("name") is not None})
    return body


def _spec_of(arg):
    return {k: v for k, v in arg.items() if k != "name"}


def _same(value, spec):
    """Whether a constructor argument is the verified one (tensors: by dtype and shape)."""
    import torch

    kind, body = next(iter(spec.items()))
    if kind == "tensor":
        return (type(value) is torch.Tensor and str(value.dtype) == "torch." + body["dtype"]
                and list(value.shape) == body["shape"])
    if kind in ("list", "tuple"):
        return (isinstance(value, (list, tuple)) and len(value) == len(body)
                and all(_same(v, s) for v, s in zip(value, body)))
    if kind == "object":
        try:
            expected = _make(spec)
            if not body.get("call", True):
                return value is expected or (type(value) is type(expected) and bool(value == expected))
            return type(value) is type(expected) and bool(value == expected)
        except Exception:  # not comparable here (tensors inside, a class that moved): not the same
            return False
    return type(value) is type(body) and value == body


def _is_default(value, default):
    return value is default or (type(value) is type(default) and isinstance(value, (bool, int, float, str))
                                and value == default)


def _init_fits(signature, init, args, kwargs):
    """Whether an instance was constructed with the arguments of one verified family: the
    kernel module is built from those, so an instance made otherwise (another eps, another
    scale, another config) keeps its original forward."""
    try:
        given = signature.bind(None, *args, **kwargs).arguments
        verified = signature.bind(None, *[a["spec"] for a in init if a["name"] is None],
                                  **{a["name"]: a["spec"] for a in init if a["name"] is not None}).arguments
    except TypeError:
        return False
    for name, param in list(signature.parameters.items())[1:]:
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            mine, theirs = given.get(name, ()), verified.get(name, ())
            if len(mine) != len(theirs) or not all(_same(v, s) for v, s in zip(mine, theirs)):
                return False
        elif param.kind is inspect.Parameter.VAR_KEYWORD:
            mine, theirs = given.get(name, {}), verified.get(name, {})
            if sorted(mine) != sorted(theirs) or not all(_same(mine[k], theirs[k]) for k in mine):
                return False
        elif name in verified:
            value = given[name] if name in given else param.default
            if value is inspect.Parameter.empty or not _same(value, verified[name]):
                return False
        elif name in given and not _is_default(given[name], param.default):
            return False
    return True


# ---------------------------------------------------------------------------------------------
# one verified family: its checks, made once, run on every call
# ---------------------------------------------------------------------------------------------

class _Family:
    """The calls one verified case stands for, and how a call of it becomes the op's arguments."""

    def __init__(self, index, spec, device):
        import torch

        self.index = index
        self.spec = spec
        self.device = device
        self.init = spec["init"]
        self.names = [a["name"] for a in spec["args"]]
        self.by_position = bool(spec.get("by_position"))
        self.on_cuda = device == "cuda"
        self.output_kind = (spec.get("output") or {}).get("kind", "tensor")
        self.checks = [self._checker(a["spec"]) for a in spec["args"]]
        self.params = [(tuple(name.split(".")[:-1]), name.split(".")[-1], getattr(torch, dt), tuple(shape))
                       for name, (dt, shape) in spec["parameters"].items()]
        self.param_names = list(spec["parameters"])
        self._constants = {}
        # Every argument a tensor: the call's values are the op's inputs as they are.
        self.flat = all(next(iter(a["spec"])) == "tensor" for a in spec["args"])
        # The direct route (set once the kernel is loaded, where ModelNew.forward allows it):
        # functions of (inputs, params) calling the operator, and the extension function.
        self.direct_traced = None
        self.direct_eager = None
        self.direct_op = None
        self.direct_plan = None

    def _checker(self, spec):
        """A function of one argument value: None where it fits the spec, else the reason."""
        import torch

        kind, body = next(iter(spec.items()))
        if kind == "tensor":
            dtype = getattr(torch, body["dtype"])
            dims = body["shape"]
            fixed = all(isinstance(d, int) for d in dims)
            shape = tuple(dims) if fixed else None
            on_cuda = self.on_cuda
            tensor = torch.Tensor

            def check(v):
                if not isinstance(v, tensor):  # fake and functional tensors while torch traces
                    return "arguments"
                if v.is_cuda is not on_cuda:
                    return "device"
                if v.dtype is not dtype:
                    return "dtype"
                if fixed:
                    if v.shape != shape:
                        return "shape"
                elif not _dims_fit(v.shape, dims):
                    return "shape"
                if not v.is_contiguous():
                    return "layout"
                return None

            return check
        if kind in ("list", "tuple"):
            items = [self._checker(s) for s in body]
            n = len(items)

            def check(v):
                if not isinstance(v, (list, tuple)) or len(v) != n:
                    return "arguments"
                for item, c in zip(v, items):
                    r = c(item)
                    if r is not None:
                        return r
                return None

            return check
        if kind == "object":
            def check(v):
                return None if _same(v, spec) else "arguments"

            return check

        def check(v):
            return None if (type(v) is type(body) and v == body) else "arguments"

        return check

    def match(self, values):
        for v, c in zip(values, self.checks):
            r = c(v)
            if r is not None:
                return r
        return None

    def state_of(self, module):
        """The module's parameters and buffers in verified order, or why they do not fit."""
        out = []
        on_cuda = self.on_cuda
        for path, leaf, dtype, shape in self.params:
            m = module
            try:
                for part in path:
                    m = m._modules[part]
                t = m._parameters[leaf] if leaf in m._parameters else m._buffers[leaf]
            except (KeyError, AttributeError):
                return "parameters"
            if t is None or t.dtype is not dtype or t.is_cuda is not on_cuda or t.shape != shape:
                return "parameters"
            out.append(t)
        return out

    def leaves(self, values):
        """The tensors among the call's values, depth first: the op's inputs."""
        if self.flat:
            return list(values)
        return _tensors_in(values)

    def rebuild(self, tensors):
        """The call's values again from the op's input tensors (constants from the spec)."""
        if self.flat:
            return tensors
        it = iter(tensors)
        return [self._rebuild(a["spec"], it) for a in self.spec["args"]]

    def _rebuild(self, spec, it):
        kind, body = next(iter(spec.items()))
        if kind == "tensor":
            return next(it)
        if kind in ("list", "tuple"):
            items = [self._rebuild(s, it) for s in body]
            return items if kind == "list" else tuple(items)
        if kind == "object":
            key = json.dumps(spec, sort_keys=True)
            if key not in self._constants:
                self._constants[key] = _make(spec)
            return self._constants[key]
        return body

    def shaped(self, outs):
        kind = self.output_kind
        if kind == "tensor":
            return outs[0]
        return tuple(outs) if kind == "tuple" else list(outs)


def _tensors_in(values):
    import torch

    out = []
    for v in values:
        if isinstance(v, (list, tuple)):
            out.extend(_tensors_in(v))
        elif isinstance(v, torch.Tensor):
            out.append(v)
    return out


def _dims_fit(shape, dims):
    if len(shape) != len(dims):
        return False
    seen = {}
    for n, d in zip(shape, dims):
        if isinstance(d, int):
            if n != d:
                return False
        else:
            if not d["min"] <= n <= d["max"]:
                return False
            if seen.setdefault(d["name"], n) != n:
                return False
    return True


def _flat(out):
    if isinstance(out, (tuple, list)):
        return list(out)
    return [out]


# ---------------------------------------------------------------------------------------------
# the direct route: where ModelNew.forward is one call of an extension function, that function
# is the operator's implementation, with no Python of this file between the caller and it
# ---------------------------------------------------------------------------------------------

def _forward_call():
    """(extension alias, function name, forward's parameter names, argument nodes) where
    ModelNew.forward is `return <alias>.<function>(positional arguments)`, else None."""
    import ast

    try:
        tree = ast.parse((HERE / "model_new.py").read_text())
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    forward = None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "forward":
                    forward = item
    if forward is None or forward.decorator_list:
        return None
    a = forward.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or not a.args:
        return None
    body = forward.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    if len(body) != 1 or not isinstance(body[0], ast.Return):
        return None
    call = body[0].value
    if (not isinstance(call, ast.Call) or call.keywords or not isinstance(call.func, ast.Attribute)
            or not isinstance(call.func.value, ast.Name) or any(isinstance(x, ast.Starred) for x in call.args)):
        return None
    return call.func.value.id, call.func.attr, [p.arg for p in a.args], call.args, forward.lineno


def _split_top(text):
    """text split at its top-level commas (not those inside brackets)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    if text[start:].strip():
        parts.append(text[start:].strip())
    return parts


def _schema_type(text):
    """The operator schema's type for a type pybind11 names in a signature, or None."""
    t = text.replace(" ", "").replace("typing.", "")
    if t == "torch.Tensor":
        return "Tensor"
    if t in ("torch.Tensor|None", "Optional[torch.Tensor]", "None|torch.Tensor"):
        return "Tensor?"
    if t in ("list[torch.Tensor]", "List[torch.Tensor]"):
        return "Tensor[]"
    if t == "bool":
        return "bool"
    if t == "float" or "SupportsFloat" in t:
        return "float"
    if t in ("int", "SupportsIndex") or "SupportsInt" in t:
        return "int"
    return None


def _function_schema(fn, name):
    """(argument types, return type, output kind) of a pybind11 function from the signature on
    its docstring's first line, or None (overloads, defaults, types an operator cannot take)."""
    doc = (getattr(fn, "__doc__", None) or "").lstrip()
    first = doc.split("\n", 1)[0]
    if not first.startswith(name + "(") or " -> " not in first:
        return None
    head, ret = first[len(name) + 1:].rsplit(" -> ", 1)
    if not head.endswith(")"):
        return None
    types = []
    for part in _split_top(head[:-1]):
        if ":" not in part or "=" in part:
            return None
        t = _schema_type(part.split(":", 1)[1])
        if t is None:
            return None
        types.append(t)
    r = ret.replace(" ", "").replace("typing.", "")
    if r == "torch.Tensor":
        return types, "Tensor", "tensor"
    if r in ("list[torch.Tensor]", "List[torch.Tensor]"):
        return types, "Tensor[]", "list"
    for prefix in ("tuple[", "Tuple["):
        if r.startswith(prefix) and r.endswith("]"):
            items = _split_top(r[len(prefix):-1])
            if items and all(x == "torch.Tensor" for x in items):
                return types, "(" + ", ".join(["Tensor"] * len(items)) + ")", "tuple"
    return None


def _argument_source(node, self_name, inputs, instance, state_names, family):
    """Where one argument of the extension call comes from: ("input", i), ("param", j) or
    ("value", constant), or None where it is something else."""
    import ast

    import torch

    if isinstance(node, ast.Name) and node.id in inputs:
        return ("input", inputs.index(node.id))
    if isinstance(node, ast.Constant) and type(node.value) in (bool, int, float):
        return ("value", node.value)
    if (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant)
            and type(node.operand.value) in (int, float)):
        return ("value", -node.operand.value)
    chain = []
    while isinstance(node, ast.Attribute):
        chain.append(node.attr)
        node = node.value
    if not chain or not isinstance(node, ast.Name) or node.id != self_name:
        return None
    found = instance
    for part in reversed(chain):
        found = getattr(found, part)
    if isinstance(found, torch.Tensor):
        name = state_names.get(id(found))
        return ("param", family.param_names.index(name)) if name in family.param_names else None
    if type(found) in (bool, int, float):
        return ("value", found)
    return None


def _direct_plan(family, new_class, call):
    """(function, plan, schema) of family's direct route, or None where it has none."""
    import torch

    alias, name, names, nodes, line = call
    ext = _state["extension"]
    module = sys.modules.get(new_class.__module__)
    if ext is None or module is None or module.__dict__.get(alias) is not ext or not family.flat:
        return None
    code = getattr(new_class.forward, "__code__", None)
    if code is None or code.co_firstlineno != line or Path(code.co_filename).name != "model_new.py":
        return None  # the class that runs is not the one read (a forward set elsewhere)
    fn = getattr(ext, name, None)
    schema = _function_schema(fn, name) if fn is not None else None
    if schema is None or len(schema[0]) != len(nodes) or len(names) - 1 != len(family.names):
        return None
    types, ret, kind = schema
    if kind != family.output_kind:
        return None
    init = family.init

    def made():
        with torch.device("meta"):
            return new_class(*[_make(a["spec"], "meta") for a in init if a["name"] is None],
                             **{a["name"]: _make(a["spec"], "meta") for a in init if a["name"] is not None})

    # Two instances: a number the constructor draws at random is not a constant of the family.
    instance, twin = made(), made()
    state_names = {id(t): n for n, t in [*instance.named_parameters(), *instance.named_buffers()]}
    twin_names = {id(t): n for n, t in [*twin.named_parameters(), *twin.named_buffers()]}
    plan = []
    for node, t in zip(nodes, types):
        source = _argument_source(node, names[0], names[1:], instance, state_names, family)
        if source is None or source != _argument_source(node, names[0], names[1:], twin, twin_names, family):
            return None
        what, value = source
        if what == "value":
            if t == "float" and type(value) in (int, float):
                value = float(value)
            elif not (t == "int" and type(value) is int) and not (t == "bool" and type(value) is bool) \
                    and not (t == "float" and type(value) is float):
                return None
            source = ("value", value)
        elif t not in ("Tensor", "Tensor?"):
            return None
        plan.append(source)
    # The fake rebuilds every input and parameter: one the call does not pass needs a fixed shape.
    passed = {(w, k) for w, k in plan}
    for i, a in enumerate(family.spec["args"]):
        if ("input", i) not in passed and not all(isinstance(d, int) for d in a["spec"]["tensor"]["shape"]):
            return None
    return fn, tuple(plan), f"({', '.join(f'{t} a{i}' for i, t in enumerate(types))}) -> {ret}", \
        _cpp_operator(ext, name, types)


def _cpp_operator(ext, name, types):
    """The function as the extension registered it from C++ (`_operator_sources`), where its
    schema is the one read off the signature line, else None."""
    import torch

    namespace = getattr(ext, "__name__", "")
    try:
        op = getattr(getattr(torch.ops, namespace), name).default
    except (AttributeError, RuntimeError):
        return None
    schema = op._schema
    if [str(a.type) for a in schema.arguments] != [
        {"Tensor": "Tensor", "float": "float", "int": "int", "bool": "bool"}.get(t, "?") for t in types
    ]:
        return None
    return op


def _direct_args(plan, inputs, params):
    """The extension call's arguments: each the op's input, its parameter, or a constant."""
    return [inputs[k] if what == "input" else params[k] if what == "param" else k for what, k in plan]


def _contiguous(out, kind):
    if kind == "tensor":
        return out if out.is_contiguous() else out.contiguous()
    outs = [o if o.is_contiguous() else o.contiguous() for o in out]
    return tuple(outs) if kind == "tuple" else outs


def _define_direct(op_name, family, fn, plan, schema, cpp):
    """The family's direct operator: the extension function itself (outputs made contiguous),
    as the extension registered it from C++ where it did (and no other family took it: the fake
    stands for one family), else registered here with the function as its Python kernel."""
    import torch

    reg = _registry()
    if cpp is not None and (cpp._schema.name not in reg.direct or reg.direct[cpp._schema.name][2] == (
            op_name, family.index)):
        full = cpp._schema.name
    else:
        cpp = None
        full = f"cuda_agent::{op_name.split('::')[1]}_direct{family.index}"
    namespace, short = full.split("::")
    first = full not in reg.direct
    reg.direct[full] = (fn, plan, (op_name, family.index))
    if first:
        kind = family.output_kind
        lib = torch.library.Library(namespace, "FRAGMENT")
        reg.libraries.append(lib)
        if cpp is None:
            lib.define(short + schema)

            def impl(*args):
                return _contiguous(reg.direct[full][0](*args), kind)

            lib.impl(short, impl, "CompositeExplicitAutograd")

        def fake(*args):
            current = reg.ops[op_name]
            fam = current.families[family.index]
            device = next(a.device for a in args if isinstance(a, torch.Tensor))
            inputs = [None] * len(fam.names)
            params = [None] * len(fam.params)
            for (what, k), a in zip(reg.direct[full][1], args):
                if what == "input":
                    inputs[k] = a
                elif what == "param":
                    params[k] = a
            for i, a in enumerate(fam.spec["args"]):
                if inputs[i] is None:
                    body = a["spec"]["tensor"]
                    inputs[i] = torch.empty(body["shape"], dtype=getattr(torch, body["dtype"]), device=device)
            for j, (_, _, dtype, shape) in enumerate(fam.params):
                if params[j] is None:
                    params[j] = torch.empty(shape, dtype=dtype, device=device)
            outs = [torch.empty_like(t, memory_format=torch.contiguous_format)
                    for t in _flat(current.reference(family.index, inputs, params))]
            return fam.shaped(outs)

        try:
            torch.library.register_fake(full, fake, lib=lib)
        except Exception:
            lib.impl(short, fake, "Meta")
    op = getattr(getattr(torch.ops, namespace), short).default
    kind = family.output_kind
    family.direct_op, family.direct_plan = op, plan

    def traced(inputs, params):
        """The operator's call from the op's inputs and parameters (what torch.compile records)."""
        return op(*_direct_args(plan, inputs, params))

    def eager(inputs, params):
        """The extension function called as the verified module calls it."""
        return _contiguous(fn(*_direct_args(plan, inputs, params)), kind)

    return traced, eager


# ---------------------------------------------------------------------------------------------
# trace: what each call did, written when the process exits
# ---------------------------------------------------------------------------------------------

class _Tally:
    def __init__(self, target, state):
        self.target = target
        self.state = state
        self.calls = 0
        self.taken = 0
        self.declined = {}
        self.seconds = 0.0
        self.shapes = {}

    def declined_as(self, reason):
        self.declined[reason] = self.declined.get(reason, 0) + 1

    def write(self, path):
        record = {"target": self.target, "class": "__CLASS__", "op": VERIFIED.get("op"), "state": self.state,
                  "calls": self.calls, "taken": self.taken, "declined": self.declined,
                  "seconds_in_class": round(self.seconds, 6), "pid": os.getpid(),
                  "shapes": [{"shape": k, "calls": v} for k, v in sorted(self.shapes.items(), key=lambda kv: -kv[1])[:16]]}
        try:
            with open(path, "a") as f:
                f.write(json.dumps(record) + "\n")
        except OSError:
            pass


def _shape_key(args):
    parts = []
    for a in args:
        shape = getattr(a, "shape", None)
        parts.append("x".join(str(d) for d in shape) if shape is not None else type(a).__name__)
    return ", ".join(parts)


def _traced(cls, original, tally, attempt, untraced):
    """forward that counts every call (and, without a kernel, only counts). While torch.compile
    or torch.export traces it, it is `untraced` (the forward without the trace): a compiled
    graph runs no Python per call, so nothing there could count, and the trace's clock and
    counters would break the graph."""
    import torch

    is_compiling = torch.compiler.is_compiling

    @functools.wraps(original)
    def forward(self, *args, **kwargs):
        if type(self) is not cls:
            return original(self, *args, **kwargs)
        if is_compiling():
            return untraced(self, *args, **kwargs)
        start = time.perf_counter()
        tally.calls += 1
        if len(tally.shapes) < 64 or _shape_key(args) in tally.shapes:
            key = _shape_key(args)
            tally.shapes[key] = tally.shapes.get(key, 0) + 1
        try:
            if attempt is None:
                tally.declined_as(tally.state)
                return original(self, *args, **kwargs)
            ok, out = attempt(self, args, kwargs)
            if ok:
                tally.taken += 1
                return out
            tally.declined_as(out)
            return original(self, *args, **kwargs)
        finally:
            tally.seconds += time.perf_counter() - start

    return forward


# ---------------------------------------------------------------------------------------------
# install
# ---------------------------------------------------------------------------------------------

def _current_digest(cls):
    """The digest of the class as it is defined now, or None where its source cannot be read."""
    module = sys.modules.get(cls.__module__)
    path = getattr(module, "__file__", None)
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return class_digest(f.read(), cls.__name__)  # noqa: F821 (written in with the loader)
    except (OSError, UnicodeDecodeError):
        return None


def _stale(cls):
    """Why the class is no longer the code the kernel was verified against, or None."""
    expected = VERIFIED.get("source_sha256")
    if not expected:
        return None
    now = _current_digest(cls)
    if now == expected:
        return None
    if now is None:
        return "its source cannot be read to compare it with the verified one"
    return "its source changed since the kernel was verified"


def _registry():
    """One table of integrated ops per process, kept across reloads of this file."""
    import types

    reg = sys.modules.get("_cuda_agent_ops")
    if reg is None:
        reg = types.ModuleType("_cuda_agent_ops")
        reg.ops = {}
        reg.direct = {}
        reg.libraries = []
        reg.traces = []
        sys.modules["_cuda_agent_ops"] = reg
    if not hasattr(reg, "direct"):  # a table made by an older loader in this process
        reg.direct = {}
    return reg


class _Op:
    """The operator of this kernel: the kernel module per family and thread, the fake and the
    backward through the original code."""

    def __init__(self, cls, original_forward, original_init, families, op_name):
        self.op_name = op_name
        self.planned = None  # called once the direct routes are known
        self.cls = cls
        self.original_forward = original_forward
        self.original_init = original_init
        self.families = families
        self.references = {}

    # the kernel ---------------------------------------------------------------------------
    def new_class(self):
        if _state["new_class"] is None:
            with _lock:
                if _state["new_class"] is None and _state["failed"] is None:
                    try:
                        new_class = _load_new_class()
                    except Exception as exc:  # no compiler, no GPU toolkit, ...: keep the original
                        _state["failed"] = exc
                        warnings.warn(f"cuda-agent: the kernel for __CLASS__ is off ({exc!s:.300}); "
                                      "using the original forward. Run `cuda-agent build` where a compiler "
                                      "is present (same torch) to ship a built copy", RuntimeWarning, stacklevel=6)
                    else:
                        self.plan_direct(new_class)
                        _state["new_class"] = new_class
        return _state["new_class"]

    def plan_direct(self, new_class):
        """Give each family whose verified module is one extension call its direct route."""
        call = _forward_call()
        if call is None:
            return
        for family in self.families:
            try:
                found = _direct_plan(family, new_class, call)
                if found is not None:
                    family.direct_traced, family.direct_eager = _define_direct(self.op_name, family, *found)
            except Exception:  # a module this reading does not follow: the family keeps the general route
                family.direct_traced = family.direct_eager = None
        if self.planned is not None:
            self.planned()

    def kernel_module(self, family):
        """This thread's kernel module of `family`: built once from the verified constructor
        arguments; every call lends it the caller's parameters."""
        modules = getattr(_local, "modules", None)
        if modules is None:
            modules = _local.modules = {}
        entry = modules.get(family.index)
        if entry is None:
            new_class = self.new_class()
            if new_class is None:
                return None
            init = family.init
            new = new_class(*[_make(a["spec"]) for a in init if a["name"] is None],
                            **{a["name"]: _make(a["spec"]) for a in init if a["name"] is not None})
            new = new.to(VERIFIED["device"]).eval()
            slots = []
            for name in family.param_names:
                *path, leaf = name.split(".")
                owner = new
                for part in path:
                    owner = owner._modules.get(part) if owner is not None else None
                if owner is None:
                    slots.append(None)
                    continue
                table = owner._parameters if leaf in owner._parameters else owner._buffers
                # A tensor only the original has (a buffer it does not save) is not the kernel's.
                slots.append((table, leaf) if leaf in table else None)
            entry = modules[family.index] = (new, slots)
        return entry

    def run(self, inputs, params, index):
        """The kernel on these tensors (the op's implementation); the original code where the
        kernel cannot be built here."""
        outs = self.kernel(inputs, params, index)
        if outs is None:
            return [t.clone() for t in _flat(self.reference(index, inputs, params))]
        return outs

    def kernel(self, inputs, params, index):
        """The kernel's outputs, contiguous, or None where it cannot be built here."""
        family = self.families[index]
        entry = self.kernel_module(family)
        if entry is None:
            return None
        new, slots = entry
        for slot, t in zip(slots, params):
            if slot is not None:
                slot[0][slot[1]] = t
        out = _contiguous(new.forward(*family.rebuild(inputs)), family.output_kind)
        return [out] if family.output_kind == "tensor" else list(out)

    # the original code on the op's tensors --------------------------------------------------
    def reference_module(self, index):
        """A shell of the original class for `index`, its tensors on the meta device: the op's
        tensors take their place on every use."""
        shell = self.references.get(index)
        if shell is None:
            import torch

            family = self.families[index]
            init = family.init
            with torch.device("meta"):
                shell = self.cls.__new__(self.cls)
                self.original_init(shell, *[_make(a["spec"], "meta") for a in init if a["name"] is None],
                                   **{a["name"]: _make(a["spec"], "meta") for a in init if a["name"] is not None})
            object.__setattr__(shell, _FLAG, ())
            self.references[index] = shell
        return shell

    def reference(self, index, inputs, params):
        import torch

        family = self.families[index]
        shell = self.reference_module(index)
        tensors = dict(zip(family.param_names, params))
        return torch.func.functional_call(shell, tensors, tuple(family.rebuild(inputs)), strict=False)


def _define(op_name, op):
    """Register the operator once per process; a reload of this file replaces what it runs."""
    import torch

    reg = _registry()
    first = op_name not in reg.ops
    reg.ops[op_name] = op
    short = op_name.split("::")[1]
    if not first:
        return getattr(torch.ops.cuda_agent, short), getattr(torch.ops.cuda_agent, short + "_nograd")
    lib = torch.library.Library("cuda_agent", "FRAGMENT")
    reg.libraries.append(lib)
    lib.define(f"{short}(Tensor[] inputs, Tensor[] params, int family) -> Tensor[]")
    # The same without an autograd kernel, for calls that need no gradient: torch.compile records
    # it where grad is off, sparing each call the autograd layer's Python.
    lib.define(f"{short}_nograd(Tensor[] inputs, Tensor[] params, int family) -> Tensor[]")

    def impl(inputs, params, family):
        return reg.ops[op_name].run(inputs, params, family)

    def fake(inputs, params, family):
        outs = _flat(reg.ops[op_name].reference(family, inputs, params))
        return [torch.empty_like(t, memory_format=torch.contiguous_format) for t in outs]

    def setup_context(ctx, inputs, output):
        ins, params, family = inputs
        ctx.n = len(ins)
        ctx.family = family
        ctx.save_for_backward(*ins, *params)

    def backward(ctx, grads):
        saved = ctx.saved_tensors
        ins, params = list(saved[:ctx.n]), list(saved[ctx.n:])
        current = reg.ops[op_name]

        def original(ins, params):
            return _flat(current.reference(ctx.family, ins, params))

        _, vjp = torch.func.vjp(original, ins, params)
        grad_ins, grad_params = vjp([g if g is not None else torch.zeros(()) for g in grads])
        return list(grad_ins), list(grad_params), None

    for name in (short, short + "_nograd"):
        lib.impl(name, impl, "CompositeExplicitAutograd")
        try:
            torch.library.register_fake(f"cuda_agent::{name}", fake, lib=lib)
        except Exception:
            # register_fake looks up the caller's source, which fails in some processes (a namespace
            # package in sys.modules trips Python's inspect); a meta kernel serves fake tensors too.
            lib.impl(name, fake, "Meta")
    torch.library.register_autograd(op_name, backward, setup_context=setup_context, lib=lib)
    return getattr(torch.ops.cuda_agent, short), getattr(torch.ops.cuda_agent, short + "_nograd")


def _compiled_route(families, sensitive, ops):
    """A function (self, args, kwargs) -> output or None, for the calls torch.compile traces.

    It makes attempt's decisions for the families it can write out with literals (tensor
    arguments of fixed shapes passed by position, parameters under attribute names). Dynamo
    guards every value it reads from a closure or an object, and a guard is checked on every
    compiled call: with the verified dtypes, shapes and routes written into the code, the graph
    carries about the guards of a plain module's. None where no family can be written so, and
    the function returns None for a call it does not decide (attempt decides those).
    """
    import keyword

    import torch

    def literal(v):
        if type(v) is float and v != v or v in (float("inf"), float("-inf")):
            raise ValueError
        return repr(v)

    def name_ok(path):
        return all(part.isidentifier() and not keyword.iskeyword(part) for part in path)

    n = len(families[0].names)
    blocks = []
    for f in families:
        shapes = [a["spec"]["tensor"]["shape"] for a in f.spec["args"]] if f.flat else None
        if (not shapes or len(f.names) != n or not all(isinstance(d, int) for s in shapes for d in s)
                or not all(name_ok((*path, leaf)) for path, leaf, _, _ in f.params)):
            continue
        cuda = "True" if f.on_cuda else "False"
        checks = []
        for i, (a, shape) in enumerate(zip(f.spec["args"], shapes)):
            checks.append(f"isinstance(a{i}, Tensor) and a{i}.dtype is torch.{a['spec']['tensor']['dtype']} "
                          f"and a{i}.is_cuda is {cuda} and a{i}.shape == {tuple(shape)!r} and a{i}.is_contiguous()")
        lines = [f"    if {f.index} in fits and " + " and ".join(f"({c})" for c in checks) + ":"]
        pnames = []
        for j, (path, leaf, dtype, shape) in enumerate(f.params):
            expr = "self"
            for part in (*path, leaf):
                expr = f"getattr({expr}, {part!r}, None)"
            lines.append(f"        p{j} = {expr}")
            pnames.append(f"p{j}")
        pchecks = [f"isinstance(p{j}, Tensor) and p{j}.dtype is {dtype} and p{j}.is_cuda is {cuda} "
                   f"and p{j}.shape == {tuple(shape)!r}" for j, (_, _, dtype, shape) in enumerate(f.params)]
        indent = "        "
        if pchecks:
            lines.append(indent + "if " + " and ".join(f"({c})" for c in pchecks) + ":")
            indent += "    "
        tensors = [f"a{i}" for i in range(n)] + pnames
        inputs = "[" + ", ".join(f"a{i}" for i in range(n)) + "]"
        params = "[" + ", ".join(pnames) + "]"
        shaped = {"tensor": "{}[0]", "tuple": "tuple({})", "list": "list({})"}[f.output_kind]
        if f.direct_op is not None:
            try:
                args = [f"a{k}" if what == "input" else f"p{k}" if what == "param" else literal(k)
                        for what, k in f.direct_plan]
                plain = f"DIRECT{f.index}({', '.join(args)})"
            except ValueError:
                plain = shaped.format(f"NOGRAD({inputs}, {params}, {f.index})")
        else:
            plain = shaped.format(f"NOGRAD({inputs}, {params}, {f.index})")
        lines.append(indent + "if grad_on and (" + " or ".join(f"{t}.requires_grad" for t in tensors) + "):")
        if AUTOGRAD:
            lines.append(indent + "    return " + shaped.format(f"OP({inputs}, {params}, {f.index})"))
        else:
            lines.append(indent + "    pass")
        lines.append(indent + "else:")
        lines.append(indent + "    return " + plain)
        blocks.append("\n".join(lines))
    if not blocks:
        return None
    unpack = ", ".join(f"a{i}" for i in range(n)) + ("," if n == 1 else "")
    head = [
        "def route(self, args, kwargs):",
        f"    if kwargs or len(args) != {n} or _state['failed'] is not None:",
        "        return None",
        "    fits = self.__dict__.get(FLAG)",
        "    if not fits:",
        "        return None",
        *(["    if self.training:", "        return None"] if sensitive else []),
        f"    {unpack} = args" if n else "",
        "    grad_on = torch.is_grad_enabled()",
    ]
    source = "\n".join([*head, *blocks, "    return None", ""])
    namespace = {"torch": torch, "Tensor": torch.Tensor, "FLAG": _FLAG, "_state": _state,
                 "OP": ops[0], "NOGRAD": ops[1]}
    for f in families:
        namespace[f"DIRECT{f.index}"] = f.direct_op
    exec(compile(source, "<cuda-agent route for __CLASS__>", "exec"), namespace)
    return namespace["route"]


def _binder(signature, families):
    """values(args, kwargs): the call's arguments in the verified order, or None where the call
    passes something else (another argument, a value other than a default)."""
    names = families[0].names
    n = len(names)
    params = list(signature.parameters.values())
    self_name = params[0].name if params else "self"
    plain = [p.name for p in params[1:1 + n]] == names

    def values(self, args, kwargs):
        if not kwargs and len(args) == n and (plain or families[0].by_position):
            return args
        if families[0].by_position:
            return None
        try:
            given = signature.bind(self, *args, **kwargs).arguments
        except TypeError:
            return None
        given.pop(self_name, None)
        for name, value in given.items():
            if name not in names and not _is_default(value, signature.parameters[name].default):
                return None
        out = []
        for name in names:
            if name in given:
                out.append(given[name])
            elif signature.parameters[name].default is not inspect.Parameter.empty:
                out.append(signature.parameters[name].default)
            else:
                return None
        return out

    return values




def install(cls):
    """Route cls's verified calls to the kernel's operator; returns cls."""
    if getattr(cls.forward, "_cuda_agent", False):
        return cls
    import torch

    original = cls.forward
    original_init = cls.__init__
    trace_path = os.environ.get("CUDA_AGENT_TRACE")
    display = "__DISPLAY__"
    reason = None
    if os.environ.get("CUDA_AGENT_DISABLE_KERNELS") == "1":
        reason = "disabled"
    else:
        stale = _stale(cls)
        if stale:
            reason = "stale source"
            warnings.warn(f"cuda-agent: the kernel for {cls.__name__} is off: {stale}, so the original "
                          f"forward runs. Run `cuda-agent check` to see the state, and `cuda-agent optimize "
                          f"{display}` for a kernel of the new code (undoing the edit brings the verified "
                          "kernel back)", RuntimeWarning, stacklevel=2)
    if reason is not None:
        if trace_path:
            tally = _Tally(display, reason)
            _registry().traces.append(tally)
            atexit.register(tally.write, trace_path)
            forward = _traced(cls, original, tally, None, original)
            forward._cuda_agent = True
            cls.forward = forward
        return cls

    families = [_Family(i, spec, VERIFIED["device"]) for i, spec in enumerate(FAMILIES)]
    op_name = VERIFIED.get("op") or f"cuda_agent::{VERIFIED['class_snake']}_{_source_digest()[:12]}"
    op = _Op(cls, original, original_init, families, op_name)
    call_op, call_nograd = _define(op_name, op)
    try:
        forward_signature = inspect.signature(original)
        bind = _binder(forward_signature, families)
        by_position = families[0].by_position or [p.name for p in list(forward_signature.parameters.values())[
            1:1 + len(families[0].names)]] == families[0].names
    except (TypeError, ValueError):
        by_position = False

        def bind(self, args, kwargs):
            return None
    try:
        init_signature = inspect.signature(original_init)
    except (TypeError, ValueError):
        init_signature = None
    sensitive = bool(VERIFIED.get("training_sensitive"))
    route = [None]  # the compiled route, written again once the direct routes are known

    def plan_route():
        route[0] = _compiled_route(families, sensitive, (call_op, call_nograd)) if by_position else None

    plan_route()
    op.planned = plan_route
    try:
        ready = _prebuilt(extension_name()) is not None
    except Exception:
        ready = False
    if ready:
        # A built copy loads in milliseconds: load it now, so that the direct route is there
        # before torch.compile first traces the class (else its first graph takes the general op).
        op.new_class()
    is_compiling = torch.compiler.is_compiling  # true under torch.compile and torch.export alike
    grad_enabled = torch.is_grad_enabled
    plain, parameter = torch.Tensor, torch.nn.Parameter

    @functools.wraps(original_init)
    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        if type(self) is cls:
            fits = () if init_signature is None else tuple(
                f.index for f in families if _init_fits(init_signature, f.init, args, kwargs))
            object.__setattr__(self, _FLAG, fits)

    def attempt(self, args, kwargs):
        """(True, output) where the kernel ran, else (False, why not)."""
        fits = self.__dict__.get(_FLAG)
        if not fits:
            return False, "constructor arguments"
        if _state["failed"] is not None:
            return False, "not built"
        if sensitive and self.training:
            return False, "training mode"
        values = bind(self, args, kwargs)
        if values is None:
            return False, "arguments"
        why = "arguments"
        for index in fits:
            family = families[index]
            why = family.match(values)
            if why is not None:
                continue
            params = family.state_of(self)
            if params.__class__ is str:
                why = params
                continue
            inputs = family.leaves(values)
            grad = False
            if grad_enabled():
                for t in inputs:
                    if t.requires_grad:
                        grad = True
                        break
                else:
                    for t in params:
                        if t.requires_grad:
                            grad = True
                            break
            if grad and not AUTOGRAD:
                why = "autograd"
                continue
            if grad:
                return True, family.shaped(call_op(inputs, params, index))
            if is_compiling():
                traced = family.direct_traced
                if traced is not None:
                    return True, traced(inputs, params)
                return True, family.shaped(call_nograd(inputs, params, index))
            subclass = False
            for t in inputs:
                if type(t) is not plain and type(t) is not parameter:
                    subclass = True  # a tensor subclass: its own semantics, not the verified ones
            if subclass:
                why = "arguments"
                continue
            try:
                direct = family.direct_eager
                if direct is not None:
                    return True, direct(inputs, params)
                outs = op.kernel(inputs, params, index)
            except Exception as exc:
                _state["failed"] = exc
                warnings.warn(f"cuda-agent: the kernel for {cls.__name__} failed ({exc!s:.200}); "
                              "using the original forward from now on", RuntimeWarning, stacklevel=3)
                return False, "kernel failed"
            if outs is None:  # it could not be built here
                return False, "not built"
            return True, family.shaped(outs)
        return False, why

    @functools.wraps(original)
    def forward(self, *args, **kwargs):
        if type(self) is cls:
            if is_compiling():
                decided = route[0]
                if decided is not None:
                    out = decided(self, args, kwargs)
                    if out is not None:
                        return out
            ok, out = attempt(self, args, kwargs)
            if ok:
                return out
        return original(self, *args, **kwargs)

    if trace_path:
        tally = _Tally(display, "on")
        _registry().traces.append(tally)
        atexit.register(tally.write, trace_path)
        forward = _traced(cls, original, tally, attempt, forward)

    forward._cuda_agent = True
    forward._cuda_agent_op = op_name

    def graph_ops():
        """The names a compiled graph of this class may call its kernel by (ns.name)."""
        names = {op_name, op_name + "_nograd"}
        names.update(k for k, v in _registry().direct.items() if v[2][0] == op_name)
        return {n.replace("::", ".") for n in names}

    forward._cuda_agent_graph_ops = graph_ops
    forward._cuda_agent_route = attempt  # (True, output) where the kernel ran, else (False, why)
    cls.forward = forward
    cls.__init__ = __init__
    return cls

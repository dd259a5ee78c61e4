"""Loads the kernel cuda-agent verified for __DISPLAY__ and routes matching calls to it.

Written by cuda-agent (session __SESSION__). __CLASS__.forward runs the kernel only for calls
that look like the ones the harness verified and timed: same device, dtypes and shapes of
contiguous tensors, same constant arguments, same parameter dtypes, no autograd, on an instance
constructed with the arguments it was verified with. Every other
call, and every call after the extension fails to build or run here, uses the original forward.
Set CUDA_AGENT_DISABLE_KERNELS=1 to turn the kernel off without editing code.

The extension is built once per machine (and torch build) into ~/.cache/cuda-agent/extensions,
or CUDA_AGENT_KERNEL_CACHE when set; `cuda-agent build` builds it ahead of time, for example in
a Dockerfile, so the first call does not wait for a compiler. Where neither a built copy nor a
compiler is present, the class keeps its original forward and says so once.
"""

import functools
import hashlib
import importlib.util
import inspect
import json
import os
import sys
import threading
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
VERIFIED = json.loads((HERE / "verified.json").read_text())

_lock = threading.Lock()
_state = {"new_class": None, "failed": None}


def _sources():
    suffixes = {".cpp", ".cu"} if VERIFIED["device"] == "cuda" else {".cpp"}
    kernels = sorted(p for p in (HERE / "kernels").iterdir() if p.suffix in suffixes)
    return [HERE / "binding.cpp", *kernels]


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


def extension_name():
    """One name per source set and torch build: a cached library is reused only where it fits."""
    import platform

    import torch

    digest = hashlib.sha256()
    for p in [*_sources(), HERE / "binding_registry.h", HERE / "model_new.py"]:
        digest.update(p.name.encode() + p.read_bytes())
    digest.update(f"{torch.__version__}|{torch.version.cuda}|{platform.python_version()}".encode())
    return f"cuda_agent_{VERIFIED['class_snake']}_{digest.hexdigest()[:12]}"


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
    import time

    name = extension_name()
    library = _prebuilt(name)
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
        module = cpp.load(
            name=name,
            sources=[str(p) for p in _sources()],
            extra_include_paths=[str(HERE)],
            extra_cflags=["-O3", "-std=c++17"],
            extra_cuda_cflags=["-O3", "-std=c++17"],
            build_directory=str(build_dir),
            verbose=False,
        )
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
    try:
        spec = importlib.util.spec_from_file_location(f"{result['name']}_model_new", HERE / "model_new.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        if previous is None:
            sys.modules.pop("cuda_extension", None)
        else:
            sys.modules["cuda_extension"] = previous
    return module.ModelNew


def _object(body):
    found = sys.modules.get(body["module"]) or importlib.import_module(body["module"])
    for name in body["qualname"].split("."):
        found = getattr(found, name)
    return found


def _make(spec):
    import torch

    kind, body = next(iter(spec.items()))
    if kind == "tensor":
        return torch.zeros(body["shape"], dtype=getattr(torch, body["dtype"]))
    if kind in ("list", "tuple"):
        items = [_make(x) for x in body]
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


def _same(value, spec, on_device=True):
    import torch

    kind, body = next(iter(spec.items()))
    if kind == "tensor":
        return (isinstance(value, torch.Tensor) and type(value) is torch.Tensor
                and (value.device.type == VERIFIED["device"] or not on_device)
                and str(value.dtype) == "torch." + body["dtype"]
                and list(value.shape) == body["shape"] and value.is_contiguous())
    if kind in ("list", "tuple"):
        return (isinstance(value, (list, tuple)) and len(value) == len(body)
                and all(_same(v, s, on_device) for v, s in zip(value, body)))
    if kind == "object":
        try:
            expected = _make(spec)
            if not body.get("call", True):
                return value is expected or (type(value) is type(expected) and bool(value == expected))
            return type(value) is type(expected) and bool(value == expected)
        except Exception:  # not comparable here (tensors inside, a class that moved): not the same
            return False
    return type(value) is type(body) and value == body


def _init_matches(signature, args, kwargs):
    """Whether an instance was constructed with the arguments the kernel was verified with:
    the kernel module is built from those, so an instance made otherwise (another eps, another
    scale, another config) keeps its original forward. Tensors are compared by dtype and shape."""
    init = VERIFIED["init"]
    try:
        given = signature.bind(None, *args, **kwargs).arguments
        verified = signature.bind(None, *[a["spec"] for a in init if a["name"] is None],
                                  **{a["name"]: a["spec"] for a in init if a["name"] is not None}).arguments
    except TypeError:
        return False
    for name, param in list(signature.parameters.items())[1:]:
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            mine, theirs = given.get(name, ()), verified.get(name, ())
            if len(mine) != len(theirs) or not all(_same(v, s, False) for v, s in zip(mine, theirs)):
                return False
        elif param.kind is inspect.Parameter.VAR_KEYWORD:
            mine, theirs = given.get(name, {}), verified.get(name, {})
            if sorted(mine) != sorted(theirs) or not all(_same(mine[k], theirs[k], False) for k in mine):
                return False
        elif name in verified:
            value = given[name] if name in given else param.default
            if value is inspect.Parameter.empty or not _same(value, verified[name], False):
                return False
        elif name in given and not _is_default(given[name], param.default):
            return False
    return True


def _is_default(value, default):
    return value is default or (type(value) is type(default) and isinstance(value, (bool, int, float, str))
                                and value == default)


def _ordered_inputs(signature, self, args, kwargs):
    """The call's arguments in the order the verified kernel takes them, or None if it differs."""
    if VERIFIED["by_position"]:
        if kwargs or len(args) != len(VERIFIED["args"]):
            return None
        values = list(args)
    else:
        try:
            bound = signature.bind(self, *args, **kwargs)
        except TypeError:
            return None
        given = dict(bound.arguments)
        given.pop(next(iter(signature.parameters)), None)  # self
        names = [a["name"] for a in VERIFIED["args"]]
        for extra in set(given) - set(names):
            default, value = signature.parameters[extra].default, given[extra]
            if default is inspect.Parameter.empty:
                return None
            if value is not default and not (type(value) is type(default)
                                             and isinstance(value, (bool, int, float, str)) and value == default):
                return None
        if any(n not in given for n in names):
            return None
        values = [given[n] for n in names]
    for value, spec in zip(values, VERIFIED["args"]):
        if not _same(value, spec["spec"]):
            return None
    return values


def _state_matches(module):
    import torch

    tensors = dict(module.named_parameters())
    tensors.update(dict(module.named_buffers()))
    if sorted(tensors) != sorted(VERIFIED["parameters"]):
        return None
    for name, t in tensors.items():
        dtype, shape = VERIFIED["parameters"][name]
        if t.device.type != VERIFIED["device"] or str(t.dtype) != "torch." + dtype or list(t.shape) != shape:
            return None
        if t.requires_grad and torch.is_grad_enabled():
            return None
    return tensors


def install(cls):
    """Wrap cls.forward so verified calls run the kernel; returns cls."""
    if os.environ.get("CUDA_AGENT_DISABLE_KERNELS") == "1" or getattr(cls.forward, "_cuda_agent", False):
        return cls
    original = cls.forward
    signature = inspect.signature(original)
    original_init = cls.__init__
    try:
        init_signature = inspect.signature(original_init)
    except (TypeError, ValueError):
        init_signature = None

    @functools.wraps(original_init)
    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        if type(self) is cls:
            object.__setattr__(self, "_cuda_agent_same_init",
                               init_signature is not None and _init_matches(init_signature, args, kwargs))

    def kernel_call(self, inputs, tensors):
        import torch

        if _state["new_class"] is None:
            with _lock:
                if _state["new_class"] is None and _state["failed"] is None:
                    try:
                        _state["new_class"] = _load_new_class()
                    except Exception as exc:  # no compiler, no GPU toolkit, ...: keep the original
                        _state["failed"] = exc
                        warnings.warn(f"cuda-agent: the kernel for {cls.__name__} is off ({exc!s:.300}); "
                                      "using the original forward. Run `cuda-agent build` where a compiler "
                                      "is present (same torch) to ship a built copy", RuntimeWarning, stacklevel=5)
        if _state["new_class"] is None:
            return None
        new = self.__dict__.get("_cuda_agent_new")
        if new is None:
            init = VERIFIED["init"]
            new = _state["new_class"](*[_make(a["spec"]) for a in init if a["name"] is None],
                                      **{a["name"]: _make(a["spec"]) for a in init if a["name"] is not None})
            new = new.to(VERIFIED["device"]).train(self.training)
            if sorted(new.state_dict()) != sorted(self.state_dict()):
                raise RuntimeError("the kernel module's parameters do not match the original's")
            object.__setattr__(self, "_cuda_agent_new", new)  # not a submodule: state_dict unchanged
        return torch.func.functional_call(new, tensors, tuple(inputs))

    @functools.wraps(original)
    def forward(self, *args, **kwargs):
        if (type(self) is cls and _state["failed"] is None and self.__dict__.get("_cuda_agent_same_init") is True
                and not (VERIFIED["training_sensitive"] and self.training)):
            inputs = _ordered_inputs(signature, self, args, kwargs)
            tensors = _state_matches(self) if inputs is not None else None
            if inputs is not None and tensors is not None and not (
                    _grad_needed(inputs)):
                try:
                    out = kernel_call(self, inputs, tensors)
                except Exception as exc:
                    _state["failed"] = exc
                    warnings.warn(f"cuda-agent: the kernel for {cls.__name__} failed ({exc!s:.200}); "
                                  "using the original forward from now on", RuntimeWarning, stacklevel=2)
                    out = None
                if out is not None:
                    return out
        return original(self, *args, **kwargs)

    forward._cuda_agent = True
    cls.forward = forward
    cls.__init__ = __init__
    return cls


def _grad_needed(inputs):
    import torch

    if not torch.is_grad_enabled():
        return False
    stack = list(inputs)
    while stack:
        v = stack.pop()
        if isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, torch.Tensor) and v.requires_grad:
            return True
    return False

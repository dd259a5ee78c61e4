"""The names the Python checks judge model_new.py by: what it may import, which modules and
torch subtrees load code, start processes or touch files, and which torch calls are allocation
and metadata rather than compute. Plain data, and the three lookups over it the rules make
(`banned_import`, `is_process_call`, `torch_call_allowed`); read by the Python checks.
"""

from __future__ import annotations

import re

from cuda_agent_cli.harness.static.rules import DUNDER_ESCAPES, FRAME_ATTRS

# The modules model_new.py may import. torch's own submodules are allowed as a tree; the names
# reached inside it are judged one by one (_judge_reference). os and sys are importable only
# for their pure parts (os.path string functions, sys.version_info): every other use is judged.
ALLOWED_IMPORTS = frozenset(
    {
        "torch",
        "cuda_extension",
        "math",
        "cmath",
        "numbers",
        "typing",
        "typing_extensions",
        "dataclasses",
        "functools",
        "enum",
        "abc",
        "collections",
        "itertools",
        "copy",
        "contextlib",
        "__future__",
        "os",
        "sys",
    }
)
# Allowed only where torch ops are: numpy and triton compute outside the extension.
HYBRID_IMPORTS = frozenset({"numpy", "triton"})

# Known modules outside the allowlist, with the finding that names why.
BANNED_IMPORTS: tuple[tuple[str, str, str], ...] = (
    ("threading", "threads", "threads can run work outside the timed region"),
    ("_thread", "threads", "threads can run work outside the timed region"),
    ("multiprocessing", "threads", "extra processes can run work outside the timed region"),
    ("torch.multiprocessing", "threads", "extra processes can run work outside the timed region"),
    ("torch.distributed", "threads", "extra processes can run work outside the timed region"),
    ("torch.utils.data", "threads", "data loader workers are processes outside the timed region"),
    ("concurrent", "threads", "thread pools can run work outside the timed region"),
    ("asyncio", "threads", "event loops can run work outside the timed region"),
    ("subprocess", "threads", "subprocesses are not allowed in a candidate"),
    ("pty", "threads", "subprocesses are not allowed in a candidate"),
    ("signal", "threads", "signal handlers can run code outside the checked call"),
    ("importlib", "dynamic_code", "dynamic imports hide what the candidate runs"),
    ("builtins", "dynamic_code", "the builtins module can rewrite how the harness behaves"),
    ("inspect", "dynamic_code", "frame inspection can reach the harness or the reference"),
    ("traceback", "dynamic_code", "tracebacks lead to the harness's frames"),
    ("gc", "dynamic_code", "the garbage collector can reach the reference's objects"),
    ("ctypes", "dynamic_code", "ctypes can patch memory or load unchecked code"),
    ("cffi", "dynamic_code", "cffi can load unchecked native code"),
    ("marshal", "dynamic_code", "marshal loads code objects that escape the static checks"),
    ("pickle", "dynamic_code", "pickle can execute arbitrary code on load"),
    ("types", "dynamic_code", "building functions or modules at runtime escapes the static checks"),
    ("runpy", "dynamic_code", "running other modules escapes the static checks"),
    ("code", "dynamic_code", "interactive interpreters escape the static checks"),
    ("pydoc", "dynamic_code", "pydoc.locate imports and returns any object by name"),
    ("operator", "dynamic_code", "attrgetter/methodcaller read attributes by computed names"),
    ("atexit", "dynamic_code", "exit hooks run code outside the checked call"),
    ("weakref", "dynamic_code", "finalizers run code outside the checked call"),
    ("model", "reference_use", "the candidate must not import the reference model"),
    ("io", "file_env_access", "file access is not allowed in a candidate"),
    ("pathlib", "file_env_access", "file access is not allowed in a candidate"),
    ("shutil", "file_env_access", "file access is not allowed in a candidate"),
    ("tempfile", "file_env_access", "file access is not allowed in a candidate"),
    ("glob", "file_env_access", "file access is not allowed in a candidate"),
    ("socket", "file_env_access", "network access is not allowed in a candidate"),
    ("urllib", "file_env_access", "network access is not allowed in a candidate"),
    ("http", "file_env_access", "network access is not allowed in a candidate"),
    ("requests", "file_env_access", "network access is not allowed in a candidate"),
    ("time", "dynamic_code", "the candidate must not read or patch the clock"),
    ("torch._C", "dynamic_code", "torch._C internals can disable the runtime guards"),
    ("torch.utils._python_dispatch", "dynamic_code", "dispatch internals can disable the runtime guards"),
    ("torch.overrides", "dynamic_code", "torch function overrides can disable the runtime guards"),
    ("torch.testing", "dynamic_code", "the candidate must not touch the checker's comparison functions"),
    ("torch.profiler", "file_env_access", "probing the profiler tells verification and timing apart"),
    ("torch.autograd.profiler", "file_env_access", "probing the profiler tells verification and timing apart"),
    ("torch.library", "dynamic_code", "custom dispatcher ops hide the torch ops run inside them"),
)

# Standard-library modules that torch and its submodules re-export as attributes (torch.os,
# torch.utils.cpp_extension.subprocess, ...): reaching one through torch is importing it.
REEXPORTED_MODULES = frozenset(
    {
        "os",
        "sys",
        "subprocess",
        "importlib",
        "builtins",
        "inspect",
        "ctypes",
        "threading",
        "_thread",
        "multiprocessing",
        "pickle",
        "marshal",
        "traceback",
        "gc",
        "operator",
        "_operator",
        "pydoc",
        "runpy",
        "code",
        "codeop",
        "shutil",
        "tempfile",
        "io",
        "pathlib",
        "socket",
        "glob",
        "atexit",
        "weakref",
        "copyreg",
        "warnings",
        "logging",
        "json",
        "time",
        "platform",
        "sysconfig",
        "site",
        "pkgutil",
        "zipimport",
        "linecache",
        "dis",
        "ast",
        "asyncio",
        "concurrent",
        "queue",
        "selectors",
        "types",
        "posix",
        "posixpath",
        "genericpath",
        "fcntl",
        "mmap",
        "resource",
        "pty",
        "shlex",
        "tokenize",
        "string",
        "ctypeslib",
        "f2py",
        "distutils",
    }
)
# Dunder names that are plain data and safe to read off a module.
SAFE_DUNDERS = frozenset(
    {
        "__version__",
        "__name__",
        "__doc__",
        "__file__",
        "__init__",
        "__call__",
        "__future__",
        "__qualname__",
        "__module__",
    }
)

# torch subtrees that load or generate code, start processes, or touch files: (prefix, finding,
# reason). Checked on every resolved name, so `from torch import hub` is caught as well.
TORCH_LOADERS: tuple[tuple[str, str, str], ...] = (
    ("torch.hub", "dynamic_code", "torch.hub imports and runs Python from a directory or a URL"),
    ("torch.package", "dynamic_code", "torch.package imports code from archives"),
    ("torch.fx", "dynamic_code", "torch.fx generates and runs Python code"),
    ("torch.compiler", "dynamic_code", "the compiler's hooks run code the checks cannot see"),
    ("torch.export", "dynamic_code", "torch.export generates and runs code"),
    ("torch.onnx", "dynamic_code", "torch.onnx generates code and writes files"),
    ("torch.utils.benchmark", "dynamic_code", "benchmark timers compile and run statements given as strings"),
    ("torch.utils.bundled_inputs", "dynamic_code", "bundled inputs generate code"),
    ("torch.utils.model_zoo", "file_env_access", "model_zoo downloads and loads files"),
    ("torch.utils.dlpack", "torch_ops_python", "dlpack hands tensors to other libraries"),
    ("torch.utils.hooks", "dynamic_code", "hooks run code outside the checked call"),
    ("torch.serialization", "file_env_access", "serialization reads and writes files"),
    ("torch.cuda.jiterator", "dynamic_code", "jiterator compiles kernels from strings the C++ checks never see"),
    ("torch.cuda.nvtx", "file_env_access", "probing the profiler tells verification and timing apart"),
    ("torch.cuda.profiler", "file_env_access", "probing the profiler tells verification and timing apart"),
    ("torch.ops.load_library", "dynamic_code", "loads native code outside the checked build"),
    ("torch.ops.import_module", "dynamic_code", "imports a Python module by name"),
    ("torch.classes", "dynamic_code", "custom classes load native code outside the checked build"),
    ("torch.utils.cpp_extension.load_library", "dynamic_code", "loads native code outside the checked build"),
    (
        "torch.nn.modules.module.register_module",
        "dynamic_code",
        "global module hooks run code inside every module, the harness's too",
    ),
    ("torch.jit.load", "file_env_access", "loads files outside the checked build"),
    ("torch.jit.save", "file_env_access", "writes files"),
    ("torch.jit.CompilationUnit", "dynamic_code", "compiles TorchScript from a string"),
    ("torch.jit.frontend", "dynamic_code", "compiles TorchScript from source"),
    ("torch.jit.fork", "threads", "jit.fork runs the function on another thread"),
    ("torch.jit._fork", "threads", "jit.fork runs the function on another thread"),
    ("torch.futures", "threads", "futures run callbacks on other threads"),
    ("torch.cuda.cudart", "file_env_access", "the CUDA runtime's profiler controls tell verification and timing apart"),
    ("torch.cuda.memory.CUDAPluggableAllocator", "dynamic_code", "a pluggable allocator loads a native library"),
    ("torch.cuda.CUDAPluggableAllocator", "dynamic_code", "a pluggable allocator loads a native library"),
    ("torch.cuda.memory.change_current_allocator", "dynamic_code", "replaces the allocator the harness measures with"),
    ("torch.cuda.change_current_allocator", "dynamic_code", "replaces the allocator the harness measures with"),
    ("torch.cuda.tunable", "file_env_access", "tunable ops read and write result files"),
    ("torch.cuda.gds", "file_env_access", "GPU direct storage reads files"),
    ("torch.amp", "precision_flags", "autocast changes the precision fixed by the harness"),
    ("torch.autocast", "precision_flags", "autocast changes the precision fixed by the harness"),
    ("torch.cuda.amp", "precision_flags", "autocast changes the precision fixed by the harness"),
    ("torch.cpu.amp", "precision_flags", "autocast changes the precision fixed by the harness"),
    ("torch.Storage.from_file", "file_env_access", "maps a file into a tensor"),
    ("torch.UntypedStorage.from_file", "file_env_access", "maps a file into a tensor"),
    ("typing.get_type_hints", "dynamic_code", "evaluates annotation strings as code"),
    ("typing.ForwardRef", "dynamic_code", "evaluates annotation strings as code"),
    ("typing_extensions.get_type_hints", "dynamic_code", "evaluates annotation strings as code"),
    ("typing_extensions.get_annotations", "dynamic_code", "evaluates annotation strings as code"),
    ("functools.singledispatch", "dynamic_code", "dispatch on types registered at runtime hides what is called"),
)

# The only os.path functions that are pure string work (used to locate sources for load()).
PURE_OS_PATH = frozenset(
    {
        "os.path.join",
        "os.path.dirname",
        "os.path.abspath",
        "os.path.basename",
        "os.path.realpath",
        "os.path.normpath",
        "os.path.splitext",
    }
)

HARMLESS_SYS = frozenset(
    {"sys.version_info", "sys.maxsize", "sys.platform", "sys.byteorder", "sys.float_info", "sys.version"}
)

DYNAMIC_BUILTINS = {
    "exec": "exec runs code the static checks cannot see",
    "eval": "eval runs code the static checks cannot see",
    "compile": "compile builds code the static checks cannot see",
    "__import__": "__import__ hides which module is imported",
    "globals": "globals() can rewrite names behind the static checks",
    "locals": "locals() can rewrite names behind the static checks",
    "vars": "vars() can rewrite names behind the static checks",
    "breakpoint": "debugger hooks run arbitrary code",
    "help": "help() imports any module named to it",
}
FILE_BUILTINS = {
    "open": "file access is not allowed in a candidate",
    "input": "reading stdin is not allowed in a candidate",
}
ATTR_BUILTINS = ("getattr", "setattr", "delattr", "hasattr")
# Builtins that must only ever be called directly by name: passed as a value (functools.reduce(
# getattr, ...), map(setattr, ...), f = eval) they run with arguments the checks cannot see.
NO_VALUE_BUILTINS = frozenset({*DYNAMIC_BUILTINS, *FILE_BUILTINS, "getattr", "setattr", "delattr"})

# torch functions ModelNew.forward may call under strict: allocation, metadata, device queries.
TORCH_ALLOWED_CALLS = frozenset(
    {
        "torch.empty",
        "torch.empty_like",
        "torch.empty_strided",
        "torch.zeros",
        "torch.zeros_like",
        "torch.ones",
        "torch.ones_like",
        "torch.full",
        "torch.full_like",
        "torch.arange",
        "torch.tensor",
        "torch.as_tensor",
        "torch.Size",
        "torch.device",
        "torch.dtype",
        "torch.is_tensor",
        "torch.numel",
        "torch.get_default_dtype",
        "torch.is_floating_point",
        "torch.is_complex",
        "torch.finfo",
        "torch.iinfo",
        "torch.no_grad",
        "torch.inference_mode",
        "torch.is_grad_enabled",
        "torch.is_inference_mode_enabled",
        "torch.enable_grad",
        "torch.set_grad_enabled",
        "torch.result_type",
        "torch.promote_types",
        "torch.broadcast_shapes",
        "torch.cuda.current_device",
        "torch.cuda.current_stream",
        "torch.cuda.default_stream",
        "torch.cuda.device",
        "torch.cuda.is_available",
        "torch.cuda.device_count",
        "torch.cuda.synchronize",
        "torch.cuda.get_device_capability",
        "torch.cuda.get_device_properties",
        "torch.cuda.get_device_name",
        "torch.utils.cpp_extension.load_inline",
        "torch.utils.cpp_extension.load",
        "torch.nn.Parameter",
        "torch.nn.Module",
    }
)
# torch namespaces whose calls never compute (types, parameter containers, init in __init__).
TORCH_ALLOWED_PREFIXES = (
    "torch.cuda.",
    "torch.utils.cpp_extension.",
    "torch.backends.",
    "torch.nn.Module",
    "torch.nn.ModuleList",
    "torch.nn.ParameterList",
    "torch.nn.ModuleDict",
    "torch.nn.ParameterDict",
)
# A torch.ops namespace other than these belongs to a custom extension, which is the point.
TORCH_OPS_LIBRARIES = frozenset({"aten", "prims", "quantized", "_quantized", "torchvision"})
# Bridges from a tensor to numpy (and so to numpy's BLAS): torch ops under strict.
NUMPY_BRIDGES = frozenset(
    {
        "__array__",
        "__array_interface__",
        "__array_wrap__",
        "__array_priority__",
        "__dlpack__",
        "__cuda_array_interface__",
    }
)

PRECISION_ATTRS = frozenset(
    {
        "allow_tf32",
        "allow_fp16_reduced_precision_reduction",
        "allow_bf16_reduced_precision_reduction",
        "fp32_precision",
        "benchmark",
        "deterministic",
        "enabled",
    }
)
PRECISION_CALLS = frozenset(
    {
        "torch.set_float32_matmul_precision",
        "torch.set_default_dtype",
        "torch.use_deterministic_algorithms",
        "torch.set_flush_denormal",
        "torch.set_default_tensor_type",
    }
)

STREAM_CREATORS = frozenset(
    {"torch.cuda.Stream", "torch.cuda.ExternalStream", "torch.Stream", "torch.cuda.streams.Stream"}
)
STREAM_SWITCHERS = frozenset({"torch.cuda.stream", "torch.cuda.set_stream", "torch.cuda.StreamContext"})
SYNC_NAMES = frozenset({"torch.cuda.synchronize"})
SYNC_METHODS = frozenset({"synchronize", "wait_stream"})
# Methods that run code at times other than the checked call (finalizers) or intercept every
# torch call on a tensor (the comparison functions of the checker included).
HOOK_METHODS = {
    "__del__": "a finalizer runs code outside the checked call",
    "__torch_function__": "__torch_function__ intercepts every torch call on the object, the checker's too",
    "__torch_dispatch__": "__torch_dispatch__ intercepts every op on the object, the checker's too",
    "__exit__": "a context manager's __exit__ can swallow kernel failures (a hidden try/except)",
    "__aexit__": "a context manager's __aexit__ can swallow kernel failures (a hidden try/except)",
}
BUILD_FLAG_KWARGS = ("extra_cflags", "extra_cuda_cflags", "extra_ldflags", "extra_include_paths")
# Libraries an extension may link: the CUDA math libraries and the C++ runtime.
# -lNAME, or -l:libNAME.so.N for the versioned files pip's nvidia-* wheels ship.
LINKABLE = re.compile(
    r"^-l:?(lib)?(cublas|cublasLt|cudnn|curand|cusparse|cusolver|cufft|cuda|cudart|nvrtc|"
    r"stdc\+\+|m|gomp)(\.so(\.\d+)*)?$"
)
INTROSPECTION_IN_FORMAT = re.compile(r"\{[^{}]*[.\[](" + "|".join(sorted(FRAME_ATTRS | DUNDER_ESCAPES)) + r"|co_\w+)\b")

# The one torch.utils subtree a candidate needs; the others load code, start workers or touch files.
TORCH_UTILS_ALLOWED = frozenset({"cpp_extension"})
# Names that `from X import name` binds to a module rather than a function or a constant.
SUBMODULE_NAMES = frozenset(
    {
        "nn",
        "functional",
        "cuda",
        "utils",
        "cpp_extension",
        "backends",
        "linalg",
        "fft",
        "special",
        "autograd",
        "path",
        "jit",
        "ops",
        "init",
        "amp",
    }
)
INJECTING_FLAGS = (
    "-include",
    "-imacros",
    "-fplugin",
    "-specs",
    "--specs",
    "-wrapper",
    "-Wl,",
    "-Xlinker",
    "-load",
    "-ccbin",
    "--compiler-bindir",
)

# torch attributes that are data, not functions: dtypes, layouts, memory formats, constants.
DTYPE_NAME = re.compile(
    r"^(u?int\d+|float\d*\w*|bfloat16|half|double|long|short|bool|int|complex\d*|"
    r"cfloat|cdouble|chalf|q?u?int\d+x?\d*|quint\w+|qint\w+|bits\w+)$"
)
TORCH_VALUES = frozenset(
    {
        "contiguous_format",
        "channels_last",
        "channels_last_3d",
        "preserve_format",
        "strided",
        "sparse_coo",
        "sparse_csr",
        "inf",
        "nan",
        "pi",
        "e",
        "newaxis",
        "float32",
        "version",
        "cuda",
        "nn",
        "utils",
        "ops",
        "backends",
        "jit",
        "autograd",
        "special",
        "linalg",
        "fft",
        "functional",
        "cpu",
        "mps",
        "types",
        "random",
        "distributions",
        "testing",
        "library",
        "overrides",
        "profiler",
        "hub",
        "fx",
        "package",
        "onnx",
        "export",
        "compiler",
        "amp",
        "futures",
        "multiprocessing",
        "distributed",
        "serialization",
        "storage",
        "classes",
    }
)
# nn containers hold modules and parameters; calling them computes nothing by itself.
NN_CONTAINERS = frozenset(
    {
        "torch.nn.Module",
        "torch.nn.ModuleList",
        "torch.nn.ModuleDict",
        "torch.nn.Parameter",
        "torch.nn.ParameterList",
        "torch.nn.ParameterDict",
        "torch.nn.Identity",
    }
)


def banned_import(module: str) -> tuple[str, str] | None:
    for prefix, name, reason in BANNED_IMPORTS:
        if module == prefix or module.startswith(prefix + "."):
            return name, reason
    return None


def is_process_call(name: str) -> bool:
    leaf = name.rsplit(".", 1)[-1]
    return leaf.startswith(("fork", "spawn", "exec", "system", "popen", "posix_spawn", "kill"))


def torch_call_allowed(name: str) -> bool:
    if name in TORCH_ALLOWED_CALLS or name.startswith(TORCH_ALLOWED_PREFIXES):
        return True
    if name.startswith("torch.ops."):
        parts = name.split(".")
        return len(parts) > 2 and parts[2] not in TORCH_OPS_LIBRARIES
    # dtype objects and the like are attributes, not calls; anything else under torch computes.
    return False

"""Static checks on a candidate: the AST of model_new.py and the C++/CUDA sources.

These catch the bypasses of THREATS.md 13, 14 and 16 before anything is compiled or run: a
try/except fallback to torch, reusing the reference, dynamic code that hides what runs, threads
and processes, unsynchronized streams, torch ops where the policy forbids them, file and
environment access. Python is checked on its AST with import aliases resolved (never by regex
on the text), so a banned word inside a string or a comment is not a finding while
`import torch.nn.functional as F; F.relu(x)` is. C++ is checked on its tokens after comments
and string literals are stripped. The runtime guards (tools/guards.py) check what actually runs;
this module only reads text, imports nothing heavy and never executes candidate code.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Iterable, Literal

Severity = Literal["error", "warning"]
POLICIES = ("strict", "hybrid")


@dataclass(frozen=True)
class Finding:
    """One static finding: `name` is the finding kind, `reason` one line a model can act on."""

    name: str
    severity: Severity
    reason: str
    location: str

    def to_detail(self) -> str:
        return f"{self.severity} {self.name} at {self.location}: {self.reason}"


def check_sources(model_new_source: str, cpp_sources: dict[str, str], policy: str) -> list[Finding]:
    """All findings for a candidate, in source order: model_new.py first, then each C++ file.

    `cpp_sources` maps a display path (e.g. "kernels/add.cu") to its text. C++ embedded in
    model_new.py for `torch.utils.cpp_extension.load_inline` is checked as C++ too.
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; expected one of {POLICIES}")
    findings: list[Finding] = []
    py = _PythonChecker(model_new_source, policy)
    findings.extend(py.run())
    for label, source in py.inline_cpp:
        findings.extend(check_cpp(source, label, policy))
    for path in sorted(cpp_sources):
        findings.extend(check_cpp(cpp_sources[path], path, policy))
    return findings


def errors(findings: Iterable[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity == "error"]


# --------------------------------------------------------------------------------------------
# Python (model_new.py)
# --------------------------------------------------------------------------------------------

_PY_FILE = "model_new.py"

# Modules whose mere import is a finding: (module prefix, finding name, reason).
_BANNED_IMPORTS: tuple[tuple[str, str, str], ...] = (
    ("threading", "threads", "threads can run work outside the timed region"),
    ("_thread", "threads", "threads can run work outside the timed region"),
    ("multiprocessing", "threads", "extra processes can run work outside the timed region"),
    ("torch.multiprocessing", "threads", "extra processes can run work outside the timed region"),
    ("concurrent", "threads", "thread pools can run work outside the timed region"),
    ("asyncio", "threads", "event loops can run work outside the timed region"),
    ("subprocess", "threads", "subprocesses are not allowed in a candidate"),
    ("pty", "threads", "subprocesses are not allowed in a candidate"),
    ("signal", "threads", "signal handlers can run code outside the checked call"),
    ("importlib", "dynamic_code", "dynamic imports hide what the candidate runs"),
    ("builtins", "dynamic_code", "the builtins module can rewrite how the harness behaves"),
    ("inspect", "dynamic_code", "frame inspection can reach the harness or the reference"),
    ("gc", "dynamic_code", "the garbage collector can reach the reference's objects"),
    ("ctypes", "dynamic_code", "ctypes can patch memory or load unchecked code"),
    ("cffi", "dynamic_code", "cffi can load unchecked native code"),
    ("marshal", "dynamic_code", "marshal loads code objects that escape the static checks"),
    ("pickle", "dynamic_code", "pickle can execute arbitrary code on load"),
    ("types", "dynamic_code", "building functions or modules at runtime escapes the static checks"),
    ("runpy", "dynamic_code", "running other modules escapes the static checks"),
    ("code", "dynamic_code", "interactive interpreters escape the static checks"),
    ("atexit", "dynamic_code", "exit hooks run code outside the checked call"),
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

# The only os.path functions that are pure string work (used to locate sources for load()).
_PURE_OS_PATH = frozenset({"os.path.join", "os.path.dirname", "os.path.abspath", "os.path.basename",
                           "os.path.realpath", "os.path.normpath", "os.path.splitext"})

_HARMLESS_SYS = frozenset({"sys.version_info", "sys.maxsize", "sys.platform", "sys.byteorder",
                           "sys.float_info", "sys.version"})

_DYNAMIC_BUILTINS = {
    "exec": "exec runs code the static checks cannot see",
    "eval": "eval runs code the static checks cannot see",
    "compile": "compile builds code the static checks cannot see",
    "__import__": "__import__ hides which module is imported",
    "globals": "globals() can rewrite names behind the static checks",
    "locals": "locals() can rewrite names behind the static checks",
    "vars": "vars() can rewrite names behind the static checks",
    "breakpoint": "debugger hooks run arbitrary code",
}
_FILE_BUILTINS = {"open": "file access is not allowed in a candidate",
                  "input": "reading stdin is not allowed in a candidate"}

# Attribute names that reach interpreter internals (frames, globals, code objects, subclasses).
_DUNDER_ESCAPES = frozenset({
    "__globals__", "__code__", "__builtins__", "__subclasses__", "__bases__", "__mro__",
    "__dict__", "__closure__", "__func__", "__self__", "__loader__", "__spec__", "__import__",
    "f_back", "f_globals", "f_locals", "gi_frame", "tb_frame", "__getattribute__", "__setattr__",
    "__class__", "__reduce__", "__reduce_ex__", "__torch_function__", "__torch_dispatch__",
})

# torch functions ModelNew.forward may call under strict: allocation, metadata, device queries.
_TORCH_ALLOWED_CALLS = frozenset({
    "torch.empty", "torch.empty_like", "torch.empty_strided", "torch.zeros", "torch.zeros_like",
    "torch.ones", "torch.ones_like", "torch.full", "torch.full_like", "torch.arange",
    "torch.tensor", "torch.as_tensor", "torch.Size", "torch.device", "torch.dtype",
    "torch.is_tensor", "torch.numel", "torch.get_default_dtype", "torch.is_floating_point",
    "torch.is_complex", "torch.finfo", "torch.iinfo", "torch.no_grad", "torch.inference_mode",
    "torch.is_grad_enabled", "torch.is_inference_mode_enabled", "torch.enable_grad",
    "torch.set_grad_enabled", "torch.result_type", "torch.promote_types", "torch.broadcast_shapes",
    "torch.cuda.current_device", "torch.cuda.current_stream", "torch.cuda.default_stream",
    "torch.cuda.device", "torch.cuda.is_available", "torch.cuda.device_count",
    "torch.cuda.synchronize", "torch.cuda.get_device_capability", "torch.cuda.get_device_properties",
    "torch.cuda.get_device_name", "torch.utils.cpp_extension.load_inline",
    "torch.utils.cpp_extension.load", "torch.nn.Parameter", "torch.nn.Module",
})
# torch namespaces whose calls never compute (types, parameter containers, init in __init__).
_TORCH_ALLOWED_PREFIXES = ("torch.cuda.", "torch.utils.cpp_extension.", "torch.backends.",
                           "torch.nn.Module", "torch.nn.ModuleList", "torch.nn.ParameterList",
                           "torch.nn.ModuleDict", "torch.nn.ParameterDict")
# A torch.ops namespace other than these belongs to a custom extension, which is the point.
_TORCH_OPS_LIBRARIES = frozenset({"aten", "prims", "quantized", "_quantized", "torchvision"})

# Tensor methods that are allocation, views, casts or metadata: allowed under strict.
_TENSOR_ALLOWED_METHODS = frozenset({
    "size", "dim", "ndim", "numel", "stride", "storage_offset", "is_contiguous", "contiguous",
    "view", "view_as", "reshape", "reshape_as", "flatten", "unflatten", "squeeze", "unsqueeze",
    "permute", "transpose", "t", "T", "mT", "expand", "expand_as", "narrow", "select", "unbind",
    "split", "chunk", "movedim", "data_ptr", "element_size", "item", "tolist", "to", "cuda", "cpu",
    "float", "half", "double", "bfloat16", "int", "long", "bool", "type", "type_as", "detach",
    "clone", "copy_", "new_empty", "new_zeros", "new_ones", "new_full", "new_tensor", "zero_",
    "fill_", "requires_grad_", "get_device", "is_cuda", "dtype", "device", "shape",
    "untyped_storage", "nelement", "dim_order", "as_strided", "numpy", "register_buffer",
    "register_parameter", "parameters", "named_parameters", "buffers", "state_dict", "eval",
    "train", "apply", "modules", "children", "load_state_dict", "forward",
})
# Tensor methods that compute. A call `x.<name>(...)` on a value that is not a module we know
# is reported under strict: the receiver's type is unknown statically, so only names that are
# torch compute ops (and hardly anything else in a model file) are on this list.
_TENSOR_COMPUTE_METHODS = frozenset({
    "abs", "abs_", "add", "add_", "addmm", "addbmm", "addcmul", "addcdiv", "addmv", "all", "amax",
    "amin", "any", "argmax", "argmin", "argsort", "baddbmm", "bmm", "ceil", "clamp", "clamp_",
    "clamp_max", "clamp_min", "clip", "cos", "cosh", "cumprod", "cumsum", "diff", "div", "div_",
    "dot", "einsum", "eq", "erf", "exp", "exp_", "expm1", "floor", "fmod", "gather", "ge", "gelu",
    "gt", "hardtanh", "index_add", "index_select", "le", "lerp", "log", "log1p", "log2",
    "log_softmax", "logsumexp", "lt", "masked_fill", "masked_fill_", "matmul", "max", "maximum",
    "mean", "median", "min", "minimum", "mm", "mul", "mul_", "mv", "ne", "neg", "neg_", "norm",
    "outer", "pow", "pow_", "prod", "reciprocal", "relu", "relu_", "remainder", "round", "rsqrt",
    "scatter", "scatter_add", "sigmoid", "sigmoid_", "sign", "sin", "sinh", "softmax", "sort",
    "sqrt", "sqrt_", "square", "std", "sub", "sub_", "sum", "tan", "tanh", "tanh_", "topk",
    "tril", "triu", "var", "where", "logical_and", "logical_or", "logical_not", "cross", "kron",
    "conv2d", "silu", "softplus", "nan_to_num", "renorm", "histc", "bincount", "unique", "flip",
    "roll", "repeat", "repeat_interleave", "tile", "cummax", "cummin", "logcumsumexp",
    "nansum", "nanmean", "quantile", "true_divide", "floor_divide", "exp2", "frac", "trunc",
    "heaviside", "hypot", "sgn", "square_", "clamp_min_", "clamp_max_", "lt_", "gt_",
    "addr", "ger", "chain_matmul",
})

_PRECISION_ATTRS = frozenset({"allow_tf32", "allow_fp16_reduced_precision_reduction",
                              "allow_bf16_reduced_precision_reduction", "fp32_precision",
                              "benchmark", "deterministic", "enabled"})
_PRECISION_CALLS = frozenset({"torch.set_float32_matmul_precision", "torch.set_default_dtype",
                              "torch.use_deterministic_algorithms", "torch.set_flush_denormal",
                              "torch.set_default_tensor_type"})

_STREAM_CREATORS = frozenset({"torch.cuda.Stream", "torch.cuda.ExternalStream", "torch.Stream",
                              "torch.cuda.streams.Stream"})
_STREAM_SWITCHERS = frozenset({"torch.cuda.stream", "torch.cuda.set_stream",
                               "torch.cuda.StreamContext"})
_SYNC_NAMES = frozenset({"torch.cuda.synchronize"})
_SYNC_METHODS = frozenset({"synchronize", "wait_stream"})


class _PythonChecker:
    def __init__(self, source: str, policy: str) -> None:
        self.source = source
        self.policy = policy
        self.findings: list[Finding] = []
        self.inline_cpp: list[tuple[str, str]] = []
        self.aliases: dict[str, str] = {}
        self.string_values: dict[str, ast.expr] = {}
        self.local_defs: set[str] = set()
        self._stream_sites: list[int] = []
        self._has_sync = False

    # -- helpers -----------------------------------------------------------------------------
    def add(self, name: str, reason: str, node: ast.AST | None, severity: Severity = "error") -> None:
        line = getattr(node, "lineno", 0)
        self.findings.append(Finding(name, severity, reason, f"{_PY_FILE}:{line}"))

    def resolve(self, node: ast.AST) -> str | None:
        """The dotted name an expression refers to, through import aliases; None if unknown."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call) and _is_name(node.func, "getattr") and len(node.args) >= 2:
            base = self.resolve(node.args[0])
            attr = node.args[1]
            if base and isinstance(attr, ast.Constant) and isinstance(attr.value, str):
                return f"{base}.{attr.value}"
        return None

    # -- driver ------------------------------------------------------------------------------
    def run(self) -> list[Finding]:
        try:
            tree = ast.parse(self.source, filename=_PY_FILE)
        except SyntaxError as exc:
            self.findings.append(Finding("syntax", "error", f"model_new.py does not parse: {exc.msg}",
                                         f"{_PY_FILE}:{exc.lineno or 0}"))
            return self.findings
        self._collect_aliases(tree)
        self._check_imports(tree)
        self._check_tree(tree)
        self._check_classes(tree)
        self._check_streams()
        self._collect_inline_cpp(tree)
        unique: dict[tuple[str, str], Finding] = {}
        for f in self.findings:
            unique.setdefault((f.name, f.location), f)
        return sorted(unique.values(), key=lambda f: int(f.location.rsplit(":", 1)[1]))

    def _collect_aliases(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.aliases[a.asname] = a.name
                    else:
                        top = a.name.split(".")[0]
                        self.aliases[top] = top
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.local_defs.add(node.name)
        # `T = torch`, `mm = torch.matmul`, `F = getattr(torch.nn, "functional")`: follow plain
        # assignments until nothing changes, so an alias of an alias still resolves.
        assigns: list[tuple[str, ast.expr]] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    for name, value in _bind_pairs(target, node.value):
                        assigns.append((name, value))
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                if isinstance(node.target, ast.Name):
                    assigns.append((node.target.id, node.value))
        for name, value in assigns:
            if isinstance(value, (ast.Constant, ast.List, ast.Tuple, ast.BinOp, ast.JoinedStr)):
                self.string_values.setdefault(name, value)
        for _ in range(8):
            changed = False
            for name, value in assigns:
                target = self.resolve(value)
                if target and self.aliases.get(name) != target:
                    self.aliases[name] = target
                    changed = True
            if not changed:
                break

    def _check_imports(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            modules: list[str] = []
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if any(a.name == "*" for a in node.names):
                    self.add("dynamic_code", "star imports hide where names come from", node)
                if node.level:
                    self.add("reference_use", "relative imports can reach the reference or the harness", node)
                    continue
                base = node.module or ""
                modules = [f"{base}.{a.name}" for a in node.names] if base == "torch" else [base]
            for module in modules:
                hit = _banned_import(module)
                if hit and not (module == "os.path" or module.startswith("os.path.")):
                    self.add(hit[0], f"import of {module}: {hit[1]}", node)

    def _check_tree(self, tree: ast.Module) -> None:
        parents: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                parents[child] = node
        for node in ast.walk(tree):
            if isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))) and node.handlers:
                self.add("try_fallback", "try/except in model_new.py can fall back to torch; "
                         "a failing kernel must fail verification", node)
            elif isinstance(node, ast.With) or isinstance(node, ast.AsyncWith):
                for item in node.items:
                    expr = item.context_expr
                    name = self.resolve(expr.func if isinstance(expr, ast.Call) else expr)
                    if name == "contextlib.suppress":
                        self.add("try_fallback", "contextlib.suppress swallows kernel failures", node)
                    if name in _STREAM_SWITCHERS:
                        self._stream_sites.append(node.lineno)
            elif isinstance(node, ast.Call):
                self._check_call(node, parents)
            elif isinstance(node, ast.Attribute):
                self._check_attribute(node, parents)
            elif isinstance(node, ast.Name):
                self._check_name(node, parents)
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                self._check_assignment(node)
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                pass

    def _check_name(self, node: ast.Name, parents: dict[ast.AST, ast.AST]) -> None:
        target = self.aliases.get(node.id, "")
        if target == "model" or target.startswith("model."):
            self.add("reference_use", f"uses the reference ({target})", node)
        elif "." in target and not isinstance(parents.get(node), ast.Attribute):
            # `from os import environ` makes a bare name as dangerous as the dotted one.
            self._judge_reference(target, node)
        if node.id == "__builtins__":
            self.add("dynamic_code", "__builtins__ can rewrite how the harness behaves", node)
        if node.id == "Model" and "Model" not in self.local_defs and node.id not in self.aliases:
            self.add("reference_use", "uses the reference class Model", node)

    def _check_attribute(self, node: ast.Attribute, parents: dict[ast.AST, ast.AST]) -> None:
        if node.attr in _DUNDER_ESCAPES:
            if not (node.attr == "__class__" and isinstance(node.value, ast.Name) and node.value.id == "self"):
                self.add("dynamic_code", f"access to {node.attr} reaches interpreter internals", node)
        name = self.resolve(node)
        if name is None:
            return
        if isinstance(parents.get(node), ast.Attribute):
            return  # judged at the outermost attribute of the chain
        self._judge_reference(name, node)

    def _judge_reference(self, name: str, node: ast.AST) -> None:
        """Rules for touching a resolved dotted name, whether or not it is called."""
        if name in ("os.environ", "os.environb") or name.startswith(("os.environ.", "sys.argv",
                                                                    "sys.orig_argv", "sys.flags")):
            self.add("file_env_access", f"{name}: the candidate must not read the environment or argv", node)
        elif name.startswith("sys.") and name not in _HARMLESS_SYS:
            self.add("dynamic_code", f"{name}: sys reaches modules, frames and hooks of the harness", node)
        elif name.startswith("model.") or name == "model":
            self.add("reference_use", f"uses the reference module ({name})", node)
        elif name.startswith("torch._C") or name.startswith("torch.utils._python_dispatch") \
                or name.startswith("torch.overrides") or name.startswith("torch._dynamo"):
            self.add("dynamic_code", f"{name}: torch internals can disable the runtime guards", node)
        elif name.startswith("torch.testing"):
            self.add("dynamic_code", f"{name}: the checker's comparison functions are off limits", node)

    def _check_assignment(self, node: ast.AST) -> None:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        for target in targets:
            for leaf in _flatten_targets(target):
                base = leaf.value if isinstance(leaf, (ast.Attribute, ast.Subscript)) else None
                if base is None:
                    continue
                full = self.resolve(leaf) if isinstance(leaf, ast.Attribute) else None
                owner = self.resolve(base)
                if full and full.startswith("torch.backends.") and leaf.attr in _PRECISION_ATTRS:
                    self.add("precision_flags", f"sets {full}; precision flags are fixed by the harness", node)
                elif owner and owner.split(".")[0] in ("os",) and "environ" in owner:
                    self.add("file_env_access", "writes the environment", node)
                elif owner:
                    # Assigning onto an imported module (torch, time, the reference, ...) is a
                    # monkeypatch: it changes what the harness or the reference runs.
                    self.add("dynamic_code", f"monkeypatches {owner}"
                             f"{'.' + leaf.attr if isinstance(leaf, ast.Attribute) else '[...]'}", node)

    def _check_call(self, node: ast.Call, parents: dict[ast.AST, ast.AST]) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id not in self.aliases and func.id not in self.local_defs:
            if func.id in _DYNAMIC_BUILTINS:
                self.add("dynamic_code", _DYNAMIC_BUILTINS[func.id], node)
            elif func.id in _FILE_BUILTINS:
                self.add("file_env_access", _FILE_BUILTINS[func.id], node)
            elif func.id in ("getattr", "setattr", "delattr", "hasattr"):
                self._check_getattr(node, func.id)
        name = self.resolve(func)
        if name is None:
            if isinstance(func, ast.Attribute):
                self._check_method_call(node, func, parents)
            return
        if name in _SYNC_NAMES:
            self._has_sync = True
        if name in _STREAM_CREATORS or name in _STREAM_SWITCHERS or name.endswith("getStreamFromPool"):
            self._stream_sites.append(node.lineno)
        if name in _PRECISION_CALLS or (name.startswith("torch.backends.") and not name.endswith("is_available")):
            self.add("precision_flags", f"{name} changes precision flags fixed by the harness", node)
        if name.startswith("os.") and name not in _PURE_OS_PATH and not name.startswith("os.environ"):
            kind = "threads" if _is_process_call(name) else "file_env_access"
            self.add(kind, f"{name} is not allowed in a candidate", node)
        elif name.startswith(("io.", "pathlib.", "shutil.", "tempfile.")):
            self.add("file_env_access", f"{name}: file access is not allowed in a candidate", node)
        elif name in ("torch.load", "torch.save", "torch.from_file", "torch.ops.load_library",
                      "torch.utils.cpp_extension.load_library"):
            self.add("file_env_access" if name != "torch.ops.load_library" else "dynamic_code",
                     f"{name} loads or stores files outside the checked build", node)
        elif name in ("torch.compile", "torch.jit.script", "torch.jit.trace") or name.startswith("triton"):
            if self.policy == "strict":
                self.add("torch_ops_python", f"{name} generates kernels from torch ops; strict policy "
                         "needs a hand-written kernel", node)
        elif self.policy == "strict" and name.startswith("torch.") and self._in_forward_path(node, parents):
            if not _torch_call_allowed(name):
                self.add("torch_ops_python", f"{name} is a torch compute op; strict policy needs a custom "
                         "kernel in forward", node)

    def _check_method_call(self, node: ast.Call, func: ast.Attribute, parents: dict[ast.AST, ast.AST]) -> None:
        if func.attr in _SYNC_METHODS:
            self._has_sync = True
        if self.policy != "strict" or not self._in_forward_path(node, parents):
            return
        if isinstance(func.value, ast.Name) and func.value.id in ("self", "cls", "super"):
            return  # the module's own methods, not tensor methods
        if func.attr in _TENSOR_COMPUTE_METHODS and func.attr not in _TENSOR_ALLOWED_METHODS:
            self.add("torch_ops_python", f".{func.attr}() is a tensor compute op; strict policy needs a "
                     "custom kernel in forward", node)

    def _check_getattr(self, node: ast.Call, fn: str) -> None:
        if len(node.args) < 2:
            return
        attr = node.args[1]
        if not (isinstance(attr, ast.Constant) and isinstance(attr.value, str)):
            self.add("dynamic_code", f"{fn} with a computed name hides what is called", node)
            return
        owner = self.resolve(node.args[0])
        if fn in ("setattr", "delattr") and owner:
            self.add("dynamic_code", f"{fn} on {owner} monkeypatches an imported module", node)
        elif fn == "getattr" and owner and owner.split(".")[0] in ("torch", "time", "sys", "os", "model"):
            # getattr(torch, "relu") is torch.relu spelled to dodge a text search: judge what
            # it resolves to instead (the call check sees it through resolve()).
            if attr.value.startswith("_"):
                self.add("dynamic_code", f"getattr reaches private {owner}.{attr.value}", node)

    def _in_forward_path(self, node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
        """True inside any function except `__init__`: code that may run on every call.

        Module-level code and constructors run once to build the model and may use torch freely
        (parameters, buffers, load_inline). Helper functions count because forward can call them.
        """
        cur = parents.get(node)
        while cur is not None:
            if isinstance(cur, ast.Lambda):
                return True
            if isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return cur.name != "__init__"
            cur = parents.get(cur)
        return False

    def _check_classes(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            for base in node.bases:
                name = self.resolve(base)
                base_id = base.id if isinstance(base, ast.Name) else None
                if (name and (name == "model.Model" or name.startswith("model."))) or \
                        (base_id == "Model" and "Model" not in self.local_defs):
                    self.add("reference_use", f"class {node.name} subclasses the reference Model", node)
        if "Model" in self.local_defs:
            # A local class named Model is a copy of the reference when ModelNew derives from it.
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
                    for base in node.bases:
                        if isinstance(base, ast.Name) and base.id == "Model":
                            self.add("reference_use", "ModelNew subclasses a class named Model "
                                     "(a copy of the reference)", node)

    def _check_streams(self) -> None:
        if self._stream_sites and not self._has_sync:
            self.add("streams", "creates or switches CUDA streams without synchronizing; work on a "
                     "side stream escapes the timed region",
                     _LineNode(min(self._stream_sites)))

    def _collect_inline_cpp(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = self.resolve(node.func)
            if name not in ("torch.utils.cpp_extension.load_inline",):
                continue
            for kw in node.keywords:
                if kw.arg in ("cpp_sources", "cuda_sources"):
                    text = self._string_of(kw.value, depth=0)
                    if text is None:
                        self.add("dynamic_code", f"load_inline {kw.arg} is not a literal string, so it "
                                 "cannot be checked", kw.value)
                    elif text:
                        self.inline_cpp.append((f"{_PY_FILE}:{kw.arg}@{node.lineno}", text))
            for kw in node.keywords:
                if kw.arg in ("extra_cflags", "extra_cuda_cflags", "extra_ldflags", "extra_include_paths"):
                    self._check_build_flags(kw.value)
            for i, arg in enumerate(node.args[1:3]):
                text = self._string_of(arg, depth=0)
                label = ("cpp_sources", "cuda_sources")[i]
                if text is None:
                    self.add("dynamic_code", f"load_inline {label} is not a literal string, so it "
                             "cannot be checked", arg)
                elif text:
                    self.inline_cpp.append((f"{_PY_FILE}:{label}@{node.lineno}", text))

    def _check_build_flags(self, node: ast.AST) -> None:
        flags = node.elts if isinstance(node, (ast.List, ast.Tuple)) else [node]
        for flag in flags:
            text = self._string_of(flag, depth=0)
            if text is None:
                self.add("dynamic_code", "build flags that are not literal strings cannot be checked", flag)
                continue
            if text.startswith("-D") and _BANNED_IN_MACRO.search(text.partition("=")[2]):
                self.add("token_pasting", f"build flag {text} defines a macro that hides a banned name", flag)
            elif text.startswith(("-include", "-imacros", "-Wl,", "-Xlinker", "-fplugin", "-B")):
                self.add("dynamic_code", f"build flag {text} injects code the checks cannot see", flag)

    def _string_of(self, node: ast.AST, depth: int) -> str | None:
        """The literal text of a load_inline source argument, following simple names."""
        if depth > 8:
            return None
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, str) else ("" if node.value is None else None)
        if isinstance(node, (ast.List, ast.Tuple)):
            parts = [self._string_of(e, depth + 1) for e in node.elts]
            return None if any(p is None for p in parts) else "\n".join(parts)  # type: ignore[arg-type]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self._string_of(node.left, depth + 1), self._string_of(node.right, depth + 1)
            return None if left is None or right is None else left + right
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                if isinstance(v, ast.Constant):
                    parts.append(str(v.value))
                else:
                    return None
            return "".join(parts)
        if isinstance(node, ast.Name) and node.id in self.string_values:
            return self._string_of(self.string_values[node.id], depth + 1)
        return None


class _LineNode(ast.AST):
    def __init__(self, lineno: int) -> None:
        super().__init__()
        self.lineno = lineno


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _bind_pairs(target: ast.expr, value: ast.expr) -> list[tuple[str, ast.expr]]:
    if isinstance(target, ast.Name):
        return [(target.id, value)]
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
            and len(target.elts) == len(value.elts):
        pairs: list[tuple[str, ast.expr]] = []
        for t, v in zip(target.elts, value.elts):
            pairs.extend(_bind_pairs(t, v))
        return pairs
    return []


def _flatten_targets(target: ast.expr) -> list[ast.expr]:
    if isinstance(target, (ast.Tuple, ast.List)):
        out: list[ast.expr] = []
        for e in target.elts:
            out.extend(_flatten_targets(e))
        return out
    if isinstance(target, ast.Starred):
        return _flatten_targets(target.value)
    return [target]


def _banned_import(module: str) -> tuple[str, str] | None:
    for prefix, name, reason in _BANNED_IMPORTS:
        if module == prefix or module.startswith(prefix + "."):
            return name, reason
    return None


def _is_process_call(name: str) -> bool:
    leaf = name.rsplit(".", 1)[-1]
    return leaf.startswith(("fork", "spawn", "exec", "system", "popen", "posix_spawn", "kill"))


def _torch_call_allowed(name: str) -> bool:
    if name in _TORCH_ALLOWED_CALLS or name.startswith(_TORCH_ALLOWED_PREFIXES):
        return True
    if name.startswith("torch.ops."):
        parts = name.split(".")
        return len(parts) > 2 and parts[2] not in _TORCH_OPS_LIBRARIES
    # dtype objects and the like are attributes, not calls; anything else under torch computes.
    return False


# --------------------------------------------------------------------------------------------
# C++ / CUDA
# --------------------------------------------------------------------------------------------

_QUALIFIED = re.compile(r"\b(torch|at)\s*::\s*((?:\w+\s*::\s*)*)(\w+)")
_METHOD = re.compile(r"(?:\.|->)\s*(\w+)\s*(?:<[^<>;]*>)?\s*\(")

# torch::/at:: functions allowed under strict: allocation, options, accessors, parallel helpers.
_CPP_ALLOWED_FUNCS = frozenset({
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full",
    "full_like", "arange", "tensor", "from_blob", "scalar_tensor", "dtype", "device", "layout",
    "requires_grad", "memory_format", "parallel_for", "parallel_reduce", "get_num_threads",
    "get_thread_num", "in_parallel_region", "acc_type", "opmath_type", "numeric_limits",
    "elementSize", "toString", "typeMetaToScalarType", "isFloatingType", "globalContext",
    "check_dim_size", "checkAllSameGPU", "checkContiguous", "checkSameType", "checkDim",
    "irange", "borrow_from_optional_tensor", "maybe_wrap_dim", "infer_size",
})
# Sub-namespaces of torch::/at:: that hold no compute ops (device, stream and handle helpers).
_CPP_ALLOWED_NAMESPACES = frozenset({"cuda", "cudnn", "vec", "detail", "indexing", "jit_none"})
# Inside at::cuda:: these still compute; everything else there is streams, guards, handles.
_CPP_CUDA_COMPUTE = re.compile(r"^(?!gemm|bgemm|gemv|getCurrent|getDefault|getStream|set|get|device|"
                               r"current|CUDA|Optional|is|memcpy|stream|blas|check).*")
_CPP_BLAS_ALLOWED = re.compile(r"^(b?gemm\w*|gemv\w*|scaled_gemm\w*|gemm_and_bias)$")

_CUBLAS_CALL = re.compile(r"\b(cublas(?:Lt)?)(\w+)\s*\(")
_CUBLAS_ALLOWED = re.compile(r"^(Create|Destroy|Set\w*|Get\w*|[SDHCZ]gemm\w*|Gemm\w*|[SDHCZ]gemv\w*|"
                             r"Matmul\w*|MatrixLayout\w*|MatmulDesc\w*|MatmulPreference\w*|"
                             r"MatmulAlgo\w*|LoggerConfigure|GemmBatchedEx|GemmStridedBatchedEx)$")
_CUDNN_CALL = re.compile(r"\bcudnn(\w+)\s*\(")
_CUDNN_ALLOWED = re.compile(r"^(Create\w*|Destroy\w*|Set\w*|Get\w*|Find\w*Convolution\w*|"
                            r"Convolution\w*|FindConvolution\w*)$")

_CPP_STREAM_CREATE = re.compile(r"\b(cudaStreamCreate\w*|getStreamFromPool|cuStreamCreate\w*|"
                                r"cudaStreamPerThread|cudaStreamNonBlocking)\b")
_CPP_SYNC = re.compile(r"\b(cudaStreamSynchronize|cudaDeviceSynchronize|cudaStreamWaitEvent|"
                       r"cudaEventSynchronize|synchronize)\s*\(")
_CPP_THREADS = re.compile(r"\b(std\s*::\s*(?:thread|jthread|async)|pthread_create|fork|vfork|"
                          r"clone|popen|system|execv\w*|execl\w*|posix_spawn\w*|cudaLaunchHostFunc|"
                          r"cudaStreamAddCallback)\b\s*[({<]?")
_CPP_FILE_ENV = re.compile(r"\b(fopen|freopen|fdopen|open|openat|creat|getenv|secure_getenv|setenv|"
                           r"putenv|unsetenv|environ|ifstream|ofstream|fstream|readlink|dlopen|"
                           r"dlsym|opendir|mmap|socket|connect)\b")
_CPP_DISPATCH_BYPASS = re.compile(r"\b(ExcludeDispatchKeyGuard|IncludeDispatchKeyGuard|"
                                  r"tls_set_dispatch_key_\w+|tls_local_dispatch_key_set|"
                                  r"ForceDispatchKeyGuard|TorchDispatchModeTLS|PythonTLSSnapshot|"
                                  r"AutoDispatchBelow\w+|_force_tls_local_dispatch_key_set|"
                                  r"DispatchKey\s*::\s*Python\w*|redispatch|callBoxed|"
                                  r"findSchemaOrThrow|TORCH_LIBRARY\w*|RegisterOperators)\b")
_CPP_PRECISION = re.compile(r"\b(setAllowTF32\w*|setFloat32MatmulPrecision|setAllowFP16\w*|"
                            r"setAllowBF16\w*|setBenchmarkCuDNN|setDeterministic\w*|"
                            r"cublasSetMathMode|setFloat32Precision|CUBLAS_TF32_TENSOR_OP_MATH|"
                            r"CUBLAS_COMPUTE_32F_FAST_\w+)\b")
_CPP_UNQUALIFY = re.compile(r"\b(using\s+namespace\s+(?:torch|at)\b|namespace\s+\w+\s*=\s*(?:torch|at)\b)")
_CPP_EMBEDDED_PYTHON = re.compile(r"\b((?:pybind11|py)\s*::\s*module_?\s*::\s*import|(?:pybind11|py)\s*::\s*"
                                  r"(?:exec|eval|eval_file)|Py(?:Run|Import|Eval|Object_SetAttr|Sys)_\w+)\b")
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)(\([^)]*\))?(.*)$", re.M)
_BANNED_IN_MACRO = re.compile(r"\b(torch|at|cudaStreamCreate\w*|fopen|getenv|pthread_create|"
                              r"dlsym|dlopen|system|popen)\b")


def check_cpp(source: str, location: str, policy: str) -> list[Finding]:
    """Findings for one C++/CUDA source, after comments and string literals are stripped."""
    code = strip_cpp_comments_and_strings(source)
    findings: list[Finding] = []

    def add(name: str, reason: str, pos: int, severity: Severity = "error") -> None:
        line = code.count("\n", 0, pos) + 1
        findings.append(Finding(name, severity, reason, f"{location}:{line}"))

    joined = _join_continuations(code)
    for m in re.finditer(r"##", code):
        add("token_pasting", "## token pasting can assemble banned names; write identifiers out", m.start())
    for m in _DEFINE.finditer(joined):
        body = m.group(3)
        hit = _BANNED_IN_MACRO.search(body)
        if hit:
            add("token_pasting", f"macro {m.group(1)} hides {hit.group(1)}; write calls out where "
                "they are used", m.start())

    if policy == "strict":
        for m in _QUALIFIED.finditer(code):
            chain = [s.strip() for s in m.group(2).split("::") if s.strip()] + [m.group(3)]
            bad = _cpp_qualified_compute(chain)
            if bad:
                add("torch_ops_cpp", f"{m.group(1)}::{'::'.join(chain)} is a torch op; strict policy "
                    "needs a hand-written kernel", m.start())
        for m in _METHOD.finditer(code):
            name = m.group(1)
            if name in _TENSOR_COMPUTE_METHODS and name not in _TENSOR_ALLOWED_METHODS:
                add("torch_ops_cpp", f".{name}() is a tensor compute op; strict policy needs a "
                    "hand-written kernel", m.start())
        for m in _CUBLAS_CALL.finditer(code):
            if not _CUBLAS_ALLOWED.match(m.group(2)):
                add("torch_ops_cpp", f"{m.group(1)}{m.group(2)}: cuBLAS is allowed for GEMM only", m.start())
        for m in _CUDNN_CALL.finditer(code):
            if not _CUDNN_ALLOWED.match(m.group(1)):
                add("torch_ops_cpp", f"cudnn{m.group(1)}: cuDNN is allowed for convolution only", m.start())
        for m in _CPP_UNQUALIFY.finditer(code):
            add("torch_ops_cpp", f"'{' '.join(m.group(1).split())}' lets unqualified names reach torch ops; "
                "qualify what you use (torch::empty, at::cuda::...)", m.start())
    for m in _CPP_EMBEDDED_PYTHON.finditer(code):
        add("dynamic_code", f"{' '.join(m.group(1).split())} runs Python from C++, out of the checks' sight",
            m.start())
    for m in _CPP_DISPATCH_BYPASS.finditer(code):
        add("dynamic_code", f"{m.group(1)} changes how ops are dispatched, which hides them from the "
            "runtime guard; bind kernels through the pybind binding", m.start())
    for m in _CPP_PRECISION.finditer(code):
        add("precision_flags", f"{m.group(1)} changes precision settings fixed by the harness", m.start())

    creates = list(_CPP_STREAM_CREATE.finditer(code))
    if creates and not _CPP_SYNC.search(code):
        add("streams", f"{creates[0].group(1)} without a synchronize; work on a side stream escapes "
            "the timed region", creates[0].start())
    for m in _CPP_THREADS.finditer(code):
        word = re.sub(r"\s+", "", m.group(1))
        if word in ("fork", "vfork", "clone", "popen", "system") and not _is_free_call(code, m):
            continue
        add("threads", f"{word}: threads and processes can run work outside the timed region", m.start())
    for m in _CPP_FILE_ENV.finditer(code):
        word = m.group(1)
        if word in ("open", "connect", "socket", "mmap", "creat", "environ") and not _is_free_call(code, m):
            continue
        add("file_env_access", f"{word}: file, environment and network access are not allowed", m.start())
    findings.sort(key=lambda f: int(f.location.rsplit(":", 1)[1]))
    return findings


def _followed_by_call(code: str, end: int) -> bool:
    return bool(re.match(r"\s*\(", code[end:]))


def _is_free_call(code: str, m: re.Match[str]) -> bool:
    """`open(...)` as a free function, not `x.open(...)` or a member named open."""
    before = code[max(0, m.start() - 2):m.start()].rstrip()
    if before.endswith((".", ">")):
        return False
    if m.group(1) == "environ":
        return True
    return _followed_by_call(code, m.end(1))


def _cpp_qualified_compute(chain: list[str]) -> bool:
    """Whether a torch::/at:: name (without its root) is a compute op forbidden under strict."""
    head = chain[0]
    if head[:1].isupper() or (head[:1] == "k" and head[1:2].isupper()):
        return False  # types and constants: Tensor, TensorOptions, ScalarType, kFloat, ...
    if len(chain) == 1:
        return head not in _CPP_ALLOWED_FUNCS
    if head == "cuda":
        if chain[1] == "blas":
            return not (len(chain) > 2 and _CPP_BLAS_ALLOWED.match(chain[2]))
        return chain[1][:1].islower() and bool(_CPP_CUDA_COMPUTE.match(chain[1]))
    if head in _CPP_ALLOWED_NAMESPACES:
        return False
    # native::, cpu::, _ops::, nn::functional::, linalg::, fft::, special:: ... all compute
    return True


def _join_continuations(code: str) -> str:
    return code.replace("\\\n", "  ")


def strip_cpp_comments_and_strings(source: str) -> str:
    """Replace comments and string/char literals with spaces, keeping newlines (line numbers).

    Raw strings (R"delim( ... )delim") are handled; #include <...> paths are kept as they are.
    """
    out: list[str] = []
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        nxt = source[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            j = source.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c == "/" and nxt == "*":
            j = source.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(_blank(source[i:j]))
            i = j
        elif c == "R" and nxt == '"' and (i == 0 or not (source[i - 1].isalnum() or source[i - 1] == "_")):
            m = re.match(r'R"([^()\\\s]{0,16})\(', source[i:])
            if m:
                end = source.find(")" + m.group(1) + '"', i + m.end())
                j = n if end < 0 else end + len(m.group(1)) + 2
                out.append('""' + _blank(source[i + 2:j]))
                i = j
                continue
            out.append(c)
            i += 1
        elif c in "\"'":
            j = i + 1
            while j < n and source[j] != c and source[j] != "\n":
                j += 2 if source[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + _blank(source[i + 1:j - 1]) + (c if j - 1 > i else ""))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _blank(text: str) -> str:
    return "".join("\n" if ch == "\n" else " " for ch in text)

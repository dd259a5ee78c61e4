"""The Python rules on calls in model_new.py: the builtins that run code, read files or reach
attributes by name, getattr/setattr, the calls of resolved names (the os module, files, torch's
loaders, torch.compile, precision flags, streams, torch compute ops under strict), tensor methods
and `self.<module>(...)` under strict, what is handed to the extension, and load()'s sources."""

from __future__ import annotations

import ast
from typing import Callable

from cuda_agent_cli.config import Policy
from cuda_agent_cli.harness.static.origin import IMPORTED, OriginAnalysis
from cuda_agent_cli.harness.static.python_names import (
    ATTR_BUILTINS,
    DYNAMIC_BUILTINS,
    FILE_BUILTINS,
    NN_CONTAINERS,
    PRECISION_CALLS,
    PURE_OS_PATH,
    SAFE_DUNDERS,
    STREAM_CREATORS,
    STREAM_SWITCHERS,
    SYNC_METHODS,
    SYNC_NAMES,
    is_process_call,
    torch_call_allowed,
)
from cuda_agent_cli.harness.static.python_source import fold, is_name
from cuda_agent_cli.harness.static.rules import TENSOR_ALLOWED_METHODS, TENSOR_COMPUTE_METHODS, is_introspection_attr


class CallRules(OriginAnalysis):
    """Mixin for the Python checker: `_check_call(node, parents)` for each call in the tree."""

    add: Callable[[str, str, ast.AST | None], None]
    policy: Policy
    aliases: dict[str, str]
    module_aliases: set[str]
    string_values: dict[str, ast.expr]
    _stream_sites: list[int]
    _has_sync: bool
    # The patch rule and the forward path, which the checker's other rules use too.
    _check_write: Callable[[ast.Attribute | ast.Subscript, ast.AST, str], None]
    _in_forward_path: Callable[[ast.AST, dict[ast.AST, ast.AST]], bool]

    def _check_call(self, node: ast.Call, parents: dict[ast.AST, ast.AST]) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id not in self.aliases and func.id not in self.local_defs:
            if func.id in DYNAMIC_BUILTINS:
                self.add("dynamic_code", DYNAMIC_BUILTINS[func.id], node)
            elif func.id in FILE_BUILTINS:
                self.add("file_env_access", FILE_BUILTINS[func.id], node)
            elif func.id in ATTR_BUILTINS:
                self._check_getattr(node, func.id)
        if (
            isinstance(func, ast.Call)
            and is_name(func.func, "getattr")
            and len(func.args) >= 2
            and isinstance(func.args[1], ast.Constant)
            and isinstance(func.args[1].value, str)
            and self.resolve(func) is None
        ):
            # getattr(x, "sum")(...) is x.sum(...) spelled to dodge the method check
            spelled = ast.copy_location(
                ast.Attribute(value=func.args[0], attr=func.args[1].value, ctx=ast.Load()), func
            )
            self._check_method_call(node, spelled, parents)
        name = self.resolve(func)
        if name is None:
            if isinstance(func, ast.Attribute):
                self._check_method_call(node, func, parents)
            self._check_extension_args(node, func)
            return
        self._check_extension_args(node, func)
        if name in SYNC_NAMES:
            self._has_sync = True
        if name in STREAM_CREATORS or name in STREAM_SWITCHERS or name.endswith("getStreamFromPool"):
            self._stream_sites.append(node.lineno)
        if name in PRECISION_CALLS or (name.startswith("torch.backends.") and not name.endswith("is_available")):
            self.add("precision_flags", f"{name} changes precision flags fixed by the harness", node)
        if name.startswith("os.") and name not in PURE_OS_PATH and not name.startswith("os.environ"):
            kind = "threads" if is_process_call(name) else "file_env_access"
            self.add(kind, f"{name} is not allowed in a candidate", node)
        elif name.startswith(("io.", "pathlib.", "shutil.", "tempfile.")):
            self.add("file_env_access", f"{name}: file access is not allowed in a candidate", node)
        elif name in (
            "torch.load",
            "torch.save",
            "torch.from_file",
            "torch.ops.load_library",
            "torch.utils.cpp_extension.load_library",
        ):
            self.add(
                "file_env_access" if name != "torch.ops.load_library" else "dynamic_code",
                f"{name} loads or stores files outside the checked build",
                node,
            )
        elif name in ("torch.compile", "torch.jit.script", "torch.jit.trace") or name.startswith("triton"):
            for kw in node.keywords:
                if name == "torch.compile" and kw.arg in ("backend", "options"):
                    self.add(
                        "dynamic_code",
                        f"torch.compile {kw.arg}= runs code (or compilers) the checks cannot see; use mode= only",
                        node,
                    )
            if self.policy == "strict":
                self.add(
                    "torch_ops_python",
                    f"{name} generates kernels from torch ops; strict policy needs a hand-written kernel",
                    node,
                )
        elif self.policy == "strict" and name.startswith("torch.") and self._in_forward_path(node, parents):
            if not torch_call_allowed(name):
                self.add(
                    "torch_ops_python",
                    f"{name} is a torch compute op; strict policy needs a custom kernel in forward",
                    node,
                )
        if name == "torch.utils.cpp_extension.load":
            self._check_load_sources(node)

    def _check_extension_args(self, node: ast.Call, func: ast.expr) -> None:
        """A module object handed to native code can be patched from C++ (py::object.attr)."""
        name = self.resolve(func) or ""
        is_ext = name.startswith("cuda_extension.") or (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in self.extension_vars
        )
        if not is_ext:
            return
        for arg in [*node.args, *[k.value for k in node.keywords]]:
            if isinstance(arg, ast.Name) and arg.id in self.module_aliases:
                self.add(
                    "dynamic_code",
                    f"passes the module {self.aliases.get(arg.id, arg.id)} to the "
                    "extension, where C++ can patch it; pass tensors and numbers",
                    node,
                )
            elif isinstance(arg, ast.Call) and self.origin(arg) == IMPORTED and self.resolve(arg) is None:
                self.add(
                    "dynamic_code",
                    "passes an object taken from an imported module to the extension; pass tensors and numbers",
                    node,
                )

    def _check_method_call(self, node: ast.Call, func: ast.Attribute, parents: dict[ast.AST, ast.AST]) -> None:
        if func.attr in SYNC_METHODS:
            self._has_sync = True
        if func.attr in ("format", "format_map") and not isinstance(func.value, ast.Constant):
            text = fold(func.value, self.string_values)
            if text is None:
                self.add(
                    "dynamic_code",
                    f".{func.attr}() on a string the checks cannot read can reach "
                    "attributes by name; format literal strings or use f-strings",
                    node,
                )
        if self.policy != "strict" or not self._in_forward_path(node, parents):
            return
        if isinstance(func.value, ast.Name) and func.value.id in self.self_names | {"self"}:
            for value in self.attr_bindings.get(func.attr, []):
                ctor = self.resolve(value.func) if isinstance(value, ast.Call) else None
                if (
                    ctor
                    and ctor.startswith("torch.nn.")
                    and ctor.split(".")[-1][:1].isupper()
                    and ctor not in NN_CONTAINERS
                ):
                    self.add(
                        "torch_ops_python",
                        f"self.{func.attr}(...) runs {ctor}, a torch op; strict policy "
                        "needs a custom kernel (use its parameters in your kernel)",
                        node,
                    )
                    break
            return  # otherwise the module's own methods, not tensor methods
        if isinstance(func.value, ast.Name) and func.value.id in ("cls", "super"):
            return
        if func.attr == "numpy":
            self.add(
                "torch_ops_python",
                ".numpy() hands the tensor to numpy, whose math (and BLAS) runs "
                "outside the extension; strict policy needs a hand-written kernel",
                node,
            )
        elif func.attr in TENSOR_COMPUTE_METHODS and func.attr not in TENSOR_ALLOWED_METHODS:
            self.add(
                "torch_ops_python",
                f".{func.attr}() is a tensor compute op; strict policy needs a custom kernel in forward",
                node,
            )

    def _check_getattr(self, node: ast.Call, fn: str) -> None:
        if len(node.args) < 2:
            if fn != "hasattr" or node.args:
                self.add("dynamic_code", f"{fn} without a literal attribute name hides what is read", node)
            return
        attr = node.args[1]
        if not (isinstance(attr, ast.Constant) and isinstance(attr.value, str)):
            bound = fold(attr, self.string_values)
            shown = f" ({bound!r})" if bound else ""
            self.add(
                "dynamic_code",
                f"{fn} with a computed name{shown} hides what is read or written; write the attribute out",
                node,
            )
            return
        if is_introspection_attr(attr.value):
            self.add("dynamic_code", f"{fn}(..., {attr.value!r}) reaches interpreter internals", node)
            return
        owner = self.resolve(node.args[0])
        if fn in ("setattr", "delattr"):
            leaf = ast.Attribute(value=node.args[0], attr=attr.value, ctx=ast.Store())
            ast.copy_location(leaf, node)
            self._check_write(leaf, node, "deletes" if fn == "delattr" else "writes")
        elif fn == "getattr" and owner and attr.value.startswith("_") and attr.value not in SAFE_DUNDERS:
            # getattr(torch, "relu") is torch.relu spelled to dodge a text search: judge what
            # it resolves to instead (the call check sees it through resolve()).
            self.add("dynamic_code", f"getattr reaches private {owner}.{attr.value}", node)

    def _check_load_sources(self, node: ast.Call) -> None:
        """load() compiles the files it is given: only kernels/ is checked, so only kernels/ may be."""
        sources = (
            node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "sources"), None)
        )
        if sources is None:
            return
        texts = [
            t
            for t in (fold(n, self.string_values) for n in ast.walk(sources) if isinstance(n, (ast.Constant, ast.Name)))
            if t
        ]
        if not texts or not any("kernels" in t for t in texts) or any(".." in t or "scratch" in t for t in texts):
            self.add(
                "dynamic_code",
                "load() sources must be files under kernels/ (the checked sources); "
                "write them there or use load_inline with literal strings",
                node,
            )

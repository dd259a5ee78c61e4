"""Static checks on model_new.py, read as an AST with import aliases resolved.

Never a regex on the text: a banned word inside a string or a comment is not a finding, while
`import torch.nn.functional as F; F.relu(x)` is. The rules, by class:

- imports: only the modules on an allowlist (torch, a few pure standard-library modules, the
  workspace's cuda_extension); every other import is a finding;
- names: a dotted name resolved through the aliases is judged wherever it appears (os.environ,
  sys.*, private `_` names, standard-library modules re-exported by torch, torch's code loaders);
- introspection: frame, code, function and class internals are refused as attributes, as
  getattr/setattr names and as strings; the builtins that read attributes or run code are
  refused when passed around as values;
- patches: an attribute or item written on an object the file did not create (an imported
  module, or anything whose origin cannot be traced) is a monkeypatch;
- strict policy: torch compute ops, numpy round trips and torch.compile in any function except
  `__init__`.

The rules on calls live in python_calls.py; C++ handed to `load_inline` is taken out by
python_inline.py and checked by cpp.py.
"""

from __future__ import annotations

import ast
import string

from cuda_agent_cli.config import Policy
from cuda_agent_cli.harness.static.origin import FRESH, IMPORTED, UNKNOWN
from cuda_agent_cli.harness.static.python_calls import CallRules
from cuda_agent_cli.harness.static.python_inline import InlineSources
from cuda_agent_cli.harness.static.python_names import (
    ALLOWED_IMPORTS,
    DTYPE_NAME,
    HARMLESS_SYS,
    HOOK_METHODS,
    HYBRID_IMPORTS,
    INTROSPECTION_IN_FORMAT,
    NO_VALUE_BUILTINS,
    NUMPY_BRIDGES,
    PRECISION_ATTRS,
    REEXPORTED_MODULES,
    SAFE_DUNDERS,
    STREAM_SWITCHERS,
    SUBMODULE_NAMES,
    TORCH_LOADERS,
    TORCH_UTILS_ALLOWED,
    TORCH_VALUES,
    banned_import,
    torch_call_allowed,
)
from cuda_agent_cli.harness.static.python_source import PY_FILE, fold, is_name
from cuda_agent_cli.harness.static.rules import (
    DUNDER_ESCAPES,
    FRAME_ATTRS,
    Finding,
    Severity,
    is_introspection_attr,
)

# Module-level helpers of a KernelBench solution file that make the task's inputs: the harness
# takes inputs from the pristine reference only, so the candidate's copies never run.
INPUT_HELPERS = ("get_inputs", "get_init_inputs")


class PythonChecker(CallRules, InlineSources):
    """Findings for one model_new.py; `inline_cpp` holds the C++ it hands to load_inline."""

    def __init__(self, source: str, policy: Policy) -> None:
        self.source = source
        self.policy = policy
        self.findings: list[Finding] = []
        self.inline_cpp: list[tuple[str, str]] = []
        self.aliases: dict[str, str] = {}
        self.module_aliases: set[str] = set()
        self.string_values: dict[str, ast.expr] = {}
        self.local_defs: set[str] = set()
        self.local_classes: dict[str, ast.ClassDef] = {}
        self.functions: dict[str, list[ast.AST]] = {}
        self.bindings: dict[str, list[ast.expr | None]] = {}
        self.attr_bindings: dict[str, list[ast.expr]] = {}
        self.params: set[str] = set()
        self.self_names: set[str] = set()
        self.extension_vars: set[str] = set()
        self.parents: dict[ast.AST, ast.AST] = {}
        self._stream_sites: list[int] = []
        self._has_sync = False
        self._helpers_used: bool | None = None
        self._origin_stack: set[int] = set()
        self._origin_cache: dict[tuple[str, str], int] = {}

    # -- helpers -----------------------------------------------------------------------------
    def add(self, name: str, reason: str, node: ast.AST | None, severity: Severity = "error") -> None:
        line = getattr(node, "lineno", 0)
        self.findings.append(Finding(name, severity, reason, f"{PY_FILE}:{line}"))

    def resolve(self, node: ast.AST) -> str | None:
        """The dotted name an expression refers to, through import aliases; None if unknown."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Call) and is_name(node.func, "getattr") and len(node.args) >= 2:
            base = self.resolve(node.args[0])
            attr = node.args[1]
            if base and isinstance(attr, ast.Constant) and isinstance(attr.value, str):
                return f"{base}.{attr.value}"
        return None

    # -- driver ------------------------------------------------------------------------------
    def run(self) -> list[Finding]:
        try:
            return self._run()
        except (RecursionError, MemoryError):
            return [
                Finding(
                    "syntax", "error", "model_new.py is nested too deeply to check; write plain code", f"{PY_FILE}:0"
                )
            ]

    def _run(self) -> list[Finding]:
        try:
            tree = ast.parse(self.source, filename=PY_FILE)
        except SyntaxError as exc:
            self.findings.append(
                Finding("syntax", "error", f"model_new.py does not parse: {exc.msg}", f"{PY_FILE}:{exc.lineno or 0}")
            )
            return self.findings
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
        self._collect_aliases(tree)
        self._collect_bindings(tree)
        self._check_imports(tree)
        self._check_tree(tree)
        self._check_classes(tree)
        self._check_streams()
        self._collect_inline_cpp(tree)
        unique: dict[tuple[str, str], Finding] = {}
        for f in self.findings:
            unique.setdefault((f.name, f.location), f)
        return sorted(unique.values(), key=lambda f: f.line)

    def _collect_aliases(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.aliases[a.asname] = a.name
                        self.module_aliases.add(a.asname)
                    else:
                        top = a.name.split(".")[0]
                        self.aliases[top] = top
                        self.module_aliases.add(top)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
                    if a.name in SUBMODULE_NAMES:
                        self.module_aliases.add(a.asname or a.name)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.local_defs.add(node.name)
                if isinstance(node, ast.ClassDef):
                    self.local_classes[node.name] = node
                else:
                    self.functions.setdefault(node.name, []).append(node)
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
                resolved = self.resolve(value)
                if resolved and self.aliases.get(name) != resolved:
                    self.aliases[name] = resolved
                    if isinstance(value, ast.Name) and value.id in self.module_aliases:
                        self.module_aliases.add(name)
                    changed = True
            if not changed:
                break

    # -- imports -----------------------------------------------------------------------------
    def _check_imports(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self._judge_import(a.name, node)
            elif isinstance(node, ast.ImportFrom):
                if any(a.name == "*" for a in node.names):
                    self.add("dynamic_code", "star imports hide where names come from", node)
                if node.level:
                    self.add("reference_use", "relative imports can reach the reference or the harness", node)
                    continue
                base = node.module or ""
                if self._judge_import(base, node):
                    for a in node.names:
                        if a.name != "*":
                            self._judge_reference(f"{base}.{a.name}", node)
                            if base.split(".")[0] == "torch":
                                hit = banned_import(f"{base}.{a.name}")
                                if hit:
                                    self.add(hit[0], f"import of {base}.{a.name}: {hit[1]}", node)

    def _judge_import(self, module: str, node: ast.AST) -> bool:
        """Whether the import may stand; adds the finding when it may not."""
        top = module.split(".")[0]
        hit = banned_import(module)
        if hit and not (module == "os.path" or module.startswith("os.path.")):
            self.add(hit[0], f"import of {module}: {hit[1]}", node)
            return False
        if top in ALLOWED_IMPORTS:
            if top == "torch" and module != "torch":
                self._judge_reference(module, node)
            return True
        if top in HYBRID_IMPORTS:
            if self.policy == "strict":
                self.add(
                    "torch_ops_python",
                    f"import of {module}: {top} computes outside the extension; "
                    "strict policy needs a hand-written kernel",
                    node,
                )
                return False
            return True
        self.add(
            "dynamic_code",
            f"import of {module}: model_new.py may import only torch, cuda_extension "
            "and pure helpers (math, typing, dataclasses, functools, ...); anything else runs code "
            "the checks cannot see",
            node,
        )
        return False

    # -- the tree ----------------------------------------------------------------------------
    def _check_tree(self, tree: ast.Module) -> None:
        parents = self.parents
        for node in ast.walk(tree):
            if isinstance(node, (ast.Try, ast.TryStar)) and node.handlers:
                # Under hybrid, torch may run anyway and what runs decides (extension_kernel): a
                # try/except around building the extension is left to that, one in forward is not.
                if self.policy == "strict" or self._in_forward_path(node, parents):
                    self.add(
                        "try_fallback",
                        "try/except in model_new.py can fall back to torch; a failing kernel must fail verification",
                        node,
                    )
            elif isinstance(node, ast.With) or isinstance(node, ast.AsyncWith):
                for item in node.items:
                    expr = item.context_expr
                    name = self.resolve(expr.func if isinstance(expr, ast.Call) else expr)
                    if name == "contextlib.suppress":
                        self.add("try_fallback", "contextlib.suppress swallows kernel failures", node)
                    if name in STREAM_SWITCHERS:
                        self._stream_sites.append(node.lineno)
            elif isinstance(node, ast.Call):
                self._check_call(node, parents)
            elif isinstance(node, ast.Attribute):
                self._check_attribute(node, parents)
            elif isinstance(node, ast.Name):
                self._check_name(node, parents)
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                self._check_assignment(node)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in HOOK_METHODS:
                kind = "try_fallback" if node.name in ("__exit__", "__aexit__") else "dynamic_code"
                self.add(kind, HOOK_METHODS[node.name], node)
            if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension, ast.With, ast.AsyncWith)):
                self._check_assignment(node)  # `for torch.relu in [f]:` writes an attribute too
            if isinstance(node, (ast.Constant, ast.BinOp, ast.JoinedStr)):
                self._check_string(node, parents)

    def _check_string(self, node: ast.AST, parents: dict[ast.AST, ast.AST]) -> None:
        """Interpreter internals named in a string: attrgetter("f_back"), "{0.f_back}".format()."""
        if isinstance(parents.get(node), (ast.BinOp, ast.JoinedStr)):
            return  # judged at the outermost concatenation
        text = fold(node, self.string_values)
        if not text or len(text) > 20000:
            return
        if text in FRAME_ATTRS or text in DUNDER_ESCAPES or (text.startswith("co_") and text.isidentifier()):
            self.add(
                "dynamic_code",
                f"the string {text!r} names interpreter internals (frames, code, globals); read only plain attributes",
                node,
            )
        elif "{" in text and INTROSPECTION_IN_FORMAT.search(text) and _is_format_string(text):
            self.add("dynamic_code", "a format string reads frame or code internals", node)

    def _check_name(self, node: ast.Name, parents: dict[ast.AST, ast.AST]) -> None:
        target = self.aliases.get(node.id, "")
        parent = parents.get(node)
        if target == "model" or target.startswith("model."):
            self.add("reference_use", f"uses the reference ({target})", node)
        elif "." in target and not isinstance(parent, ast.Attribute):
            # `from os import environ` makes a bare name as dangerous as the dotted one.
            self._judge_reference(target, node)
            self._judge_torch_value(target, node, parents)
        if node.id == "__builtins__":
            self.add("dynamic_code", "__builtins__ can rewrite how the harness behaves", node)
        if node.id == "Model" and "Model" not in self.local_defs and node.id not in self.aliases:
            self.add("reference_use", "uses the reference class Model", node)
        if node.id in NO_VALUE_BUILTINS and isinstance(node.ctx, ast.Store):
            self.add("dynamic_code", f"rebinding the builtin {node.id} hides what is called; pick another name", node)
        elif (
            node.id in NO_VALUE_BUILTINS
            and isinstance(node.ctx, ast.Load)
            and node.id not in self.aliases
            and node.id not in self.local_defs
            and node.id not in self.params
            and not (isinstance(parent, ast.Call) and parent.func is node)
        ):
            self.add(
                "dynamic_code",
                f"{node.id} passed as a value runs with arguments the checks cannot "
                f"see; call {node.id}(...) directly with a literal name, or not at all",
                node,
            )

    def _check_attribute(self, node: ast.Attribute, parents: dict[ast.AST, ast.AST]) -> None:
        if is_introspection_attr(node.attr):
            if not (
                node.attr == "__class__"
                and isinstance(node.value, ast.Name)
                and node.value.id in self.self_names | {"self"}
            ):
                self.add(
                    "dynamic_code",
                    f"access to {node.attr} reaches interpreter internals (frames, code, globals, the class graph)",
                    node,
                )
        elif node.attr in NUMPY_BRIDGES and self.policy == "strict":
            self.add(
                "torch_ops_python",
                f"{node.attr} hands the tensor to numpy, whose math runs outside "
                "the extension; strict policy needs a hand-written kernel",
                node,
            )
        if (
            isinstance(node.value, ast.Name)
            and node.value.id in self.local_classes
            and self._methods(node.attr)
            and not node.attr.startswith("__")
        ):
            call = parents.get(node)
            first = call.args[0] if isinstance(call, ast.Call) and call.func is node and call.args else None
            if not (isinstance(first, ast.Name) and first.id in self.self_names):
                self.add(
                    "dynamic_code",
                    f"{node.value.id}.{node.attr} used unbound: a method must run on "
                    "its own object (call it through self)",
                    node,
                )
        name = self.resolve(node)
        if name is None:
            return
        if isinstance(parents.get(node), ast.Attribute):
            return  # judged at the outermost attribute of the chain
        self._judge_reference(name, node)
        self._judge_torch_value(name, node, parents)

    def _judge_torch_value(self, name: str, node: ast.AST, parents: dict[ast.AST, ast.AST]) -> None:
        """Under strict, a torch compute function handed around as a value (a default argument,
        `self.act = torch.relu`, `forward = torch.relu`, `map(F.gelu, ...)`) runs as a torch op
        wherever it is called, out of sight of the call check."""
        if self.policy != "strict" or not isinstance(getattr(node, "ctx", None), ast.Load):
            return
        parent = parents.get(node)
        if isinstance(parent, ast.Call) and parent.func is node:
            return  # a call: judged by _check_call
        if isinstance(parent, ast.ClassDef) and node in parent.bases:
            return
        parts = name.split(".")
        leaf = parts[-1]
        judged = (
            (len(parts) == 2 and parts[0] == "torch")
            or (
                len(parts) == 3
                and parts[:2] in (["torch", "special"], ["torch", "linalg"], ["torch", "fft"], ["torch", "Tensor"])
            )
            or (len(parts) == 4 and parts[:3] == ["torch", "nn", "functional"])
        )
        if (
            not judged
            or leaf[:1].isupper()
            or leaf.startswith("_")
            or leaf in TORCH_VALUES
            or DTYPE_NAME.match(leaf)
            or torch_call_allowed(name)
        ):
            return
        self.add(
            "torch_ops_python",
            f"{name} passed around as a value runs a torch op wherever it is "
            "called; strict policy needs a custom kernel",
            node,
        )

    def _judge_reference(self, name: str, node: ast.AST) -> None:
        """Rules for touching a resolved dotted name, whether or not it is called."""
        parts = name.split(".")
        root = parts[0]
        if name in ("os.environ", "os.environb") or name.startswith(
            ("os.environ.", "sys.argv", "sys.orig_argv", "sys.flags")
        ):
            self.add("file_env_access", f"{name}: the candidate must not read the environment or argv", node)
            return
        if name.startswith("sys.") and name not in HARMLESS_SYS:
            self.add("dynamic_code", f"{name}: sys reaches modules, frames and hooks of the harness", node)
            return
        if root == "model":
            self.add("reference_use", f"uses the reference module ({name})", node)
            return
        for seg in parts[1:]:
            if is_introspection_attr(seg):
                self.add("dynamic_code", f"{name} reaches interpreter internals", node)
                return
            if seg in ("numpy", "np") and root != "numpy":
                if self.policy == "strict":
                    self.add(
                        "torch_ops_python",
                        f"{name} reaches numpy, whose math runs outside the extension; "
                        "strict policy needs a hand-written kernel",
                        node,
                    )
                return
            if seg in REEXPORTED_MODULES:
                self.add(
                    "dynamic_code", f"{name} reaches the {seg} module through {root}; model_new.py may not use it", node
                )
                return
        for seg in parts[1:]:
            if (
                seg.startswith("_")
                and seg not in SAFE_DUNDERS
                and root != "cuda_extension"
                and not name.startswith("torch.ops.")
                and not is_introspection_attr(seg)
            ):
                self.add("dynamic_code", f"{name}: private internals can disable the runtime guards", node)
                return
        if name.startswith("torch.testing"):
            self.add("dynamic_code", f"{name}: the checker's comparison functions are off limits", node)
            return
        if name.startswith(("torch.overrides", "torch.utils._python_dispatch", "torch.library")):
            self.add("dynamic_code", f"{name}: torch internals can disable the runtime guards", node)
            return
        for prefix, finding, reason in TORCH_LOADERS:
            if (
                name == prefix
                or name.startswith(prefix + ".")
                or (prefix.endswith("register_module") and name.startswith(prefix))
            ):
                if finding == "torch_ops_python" and self.policy != "strict":
                    return
                self.add(finding, f"{name}: {reason}", node)
                return
        if len(parts) > 2 and parts[:2] == ["torch", "utils"] and parts[2] not in TORCH_UTILS_ALLOWED:
            self.add("dynamic_code", f"{name}: of torch.utils a kernel needs only cpp_extension", node)
            return
        if name.startswith(("torch.multiprocessing", "torch.distributed", "torch.utils.data")):
            self.add("threads", f"{name}: extra processes can run work outside the timed region", node)

    # -- assignments (the patch rule) --------------------------------------------------------
    def _check_assignment(self, node: ast.AST) -> None:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            targets = [node.target]
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            targets = [item.optional_vars for item in node.items if item.optional_vars is not None]
        for target in targets:
            for leaf in _flatten_targets(target):
                if isinstance(leaf, (ast.Attribute, ast.Subscript)):
                    self._check_write(
                        leaf,
                        node if hasattr(node, "lineno") else leaf,
                        "deletes" if isinstance(node, ast.Delete) else "writes",
                    )

    def _check_write(self, leaf: ast.Attribute | ast.Subscript, node: ast.AST, verb: str) -> None:
        base = leaf.value
        full = self.resolve(leaf) if isinstance(leaf, ast.Attribute) else None
        owner = self.resolve(base)
        what = f".{leaf.attr}" if isinstance(leaf, ast.Attribute) else "[...]"
        if (
            full
            and full.startswith("torch.backends.")
            and isinstance(leaf, ast.Attribute)
            and leaf.attr in PRECISION_ATTRS
        ):
            self.add("precision_flags", f"sets {full}; precision flags are fixed by the harness", node)
            return
        if owner and owner.split(".")[0] == "os" and "environ" in owner:
            self.add("file_env_access", "writes the environment", node)
            return
        if owner:
            # Assigning onto an imported module (torch, time, the reference, ...) is a
            # monkeypatch: it changes what the harness or the reference runs.
            self.add("dynamic_code", f"monkeypatches {owner}{what}", node)
            return
        where = self.origin(base)
        if where == IMPORTED:
            self.add(
                "dynamic_code",
                f"{verb} {what} on an object that comes from an imported module "
                "(through a container, a call or a variable): a monkeypatch",
                node,
            )
        elif isinstance(leaf, ast.Attribute) and where != FRESH:
            self.add(
                "dynamic_code",
                f"{verb} {what} on an object whose origin cannot be traced; only "
                "attributes of self and of objects created in this file may be assigned",
                node,
            )
        elif isinstance(leaf, ast.Subscript) and where == UNKNOWN:
            self.add(
                "dynamic_code",
                f"{verb} an item of an object whose origin cannot be traced; only "
                "tensors and containers created in this file may be written",
                node,
            )

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
                if (
                    cur.name in INPUT_HELPERS
                    and isinstance(parents.get(cur), ast.Module)
                    and not self._input_helpers_used()
                ):
                    return False  # KernelBench's get_inputs(): the harness never calls the candidate's
                return cur.name != "__init__"
            cur = parents.get(cur)
        return False

    def _input_helpers_used(self) -> bool:
        """Whether anything in model_new.py names get_inputs/get_init_inputs besides their own
        definitions (then they may run on every call, and count as forward's code)."""
        if self._helpers_used is None:
            self._helpers_used = any(
                (isinstance(n, ast.Name) and n.id in INPUT_HELPERS)
                or (isinstance(n, ast.Attribute) and n.attr in INPUT_HELPERS)
                or (isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in INPUT_HELPERS)
                for n in self.parents
            )
        return self._helpers_used

    def _check_classes(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            for base in node.bases:
                name = self.resolve(base)
                base_id = base.id if isinstance(base, ast.Name) else None
                if (name and (name == "model.Model" or name.startswith("model."))) or (
                    base_id == "Model" and "Model" not in self.local_defs
                ):
                    self.add("reference_use", f"class {node.name} subclasses the reference Model", node)
            for kw in node.keywords:
                if kw.arg == "metaclass":
                    self.add("dynamic_code", "a metaclass runs code when classes are built and looked up", node)
        if "Model" in self.local_defs:
            # A local class named Model is a copy of the reference when ModelNew derives from it.
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
                    for base in node.bases:
                        if isinstance(base, ast.Name) and base.id == "Model":
                            self.add(
                                "reference_use",
                                "ModelNew subclasses a class named Model (a copy of the reference)",
                                node,
                            )

    def _check_streams(self) -> None:
        if self._stream_sites and not self._has_sync:
            self.add(
                "streams",
                "creates or switches CUDA streams without synchronizing; work on a "
                "side stream escapes the timed region",
                _LineNode(min(self._stream_sites)),
            )


class _LineNode(ast.AST):
    def __init__(self, lineno: int) -> None:
        super().__init__()
        self.lineno = lineno


def _is_format_string(text: str) -> bool:
    try:
        list(string.Formatter().parse(text))
    except ValueError:
        return False
    return True


def _bind_pairs(target: ast.expr, value: ast.expr) -> list[tuple[str, ast.expr]]:
    if isinstance(target, ast.Name):
        return [(target.id, value)]
    if (
        isinstance(target, (ast.Tuple, ast.List))
        and isinstance(value, (ast.Tuple, ast.List))
        and len(target.elts) == len(value.elts)
    ):
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

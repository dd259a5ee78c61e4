"""Where the object behind an expression in model_new.py comes from, for the patch rule.

An attribute or item write is legal only on an object the file created; this traces an
expression back through every binding of the names, attributes and containers it goes through
(assignments, loops, comprehensions, with-targets, setattr, container mutators, class bodies,
function returns), flow-insensitively over the whole file, which errs towards "foreign".
"""

from __future__ import annotations

import ast
from typing import Callable, Iterable

# Where a value comes from, for the patch rule: FRESH objects were created in this file (self,
# literals, results of torch/extension constructors); PARAM are arguments; IMPORTED reach an
# imported module; UNKNOWN cannot be traced. Ordered: combining takes the worst.
FRESH, PARAM, UNKNOWN, IMPORTED = 0, 1, 2, 3
# Methods that put their arguments into the receiver (a list, a dict, a set, a deque).
MUTATORS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "update",
        "setdefault",
        "add",
        "appendleft",
        "extendleft",
        "push",
        "put",
        "__setitem__",
        "__iadd__",
    }
)
# Callables whose result is built from their arguments: the result is as foreign as they are.
PASS_THROUGH_BUILTINS = frozenset(
    {
        "next",
        "iter",
        "reversed",
        "sorted",
        "max",
        "min",
        "list",
        "tuple",
        "dict",
        "set",
        "frozenset",
        "type",
        "super",
        "getattr",
        "filter",
        "map",
        "zip",
        "enumerate",
        "id",
        "object",
    }
)


class OriginAnalysis:
    """Mixin for the Python checker: `origin(expr)` is FRESH, PARAM, UNKNOWN or IMPORTED."""

    resolve: Callable[[ast.AST], str | None]
    parents: dict[ast.AST, ast.AST]
    bindings: dict[str, list[ast.expr | None]]
    attr_bindings: dict[str, list[ast.expr]]
    params: set[str]
    self_names: set[str]
    local_defs: set[str]
    local_classes: dict[str, ast.ClassDef]
    functions: dict[str, list[ast.AST]]
    extension_vars: set[str]
    _origin_stack: set[int]
    _origin_cache: dict[tuple[str, str], int]

    def _collect_bindings(self, tree: ast.Module) -> None:
        """Every value each plain name, and each attribute name on any object, is bound to."""

        def bind(target: ast.expr, value: ast.expr | None) -> None:
            if isinstance(target, ast.Name):
                self.bindings.setdefault(target.id, []).append(value)
            elif isinstance(target, (ast.Tuple, ast.List)):
                pairs = (
                    value.elts
                    if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts)
                    else None
                )
                for i, elt in enumerate(target.elts):
                    bind(
                        elt,
                        pairs[i]
                        if pairs
                        else (ast.Subscript(value=value, slice=ast.Constant(i)) if value is not None else None),
                    )
            elif isinstance(target, ast.Starred):
                bind(target.value, value)
            elif isinstance(target, ast.Attribute) and value is not None:
                # Any object's attribute: `b.m = torch` makes `b.m` (and every `.m`) foreign.
                self.attr_bindings.setdefault(target.attr, []).append(value)
            elif isinstance(target, ast.Subscript) and value is not None:
                hold(target.value, value)  # the container now holds the value

        def hold(container: ast.expr, value: ast.expr) -> None:
            while isinstance(container, ast.Subscript):
                container = container.value
            if isinstance(container, ast.Name):
                self.bindings.setdefault(container.id, []).append(value)
            elif isinstance(container, ast.Attribute):
                self.attr_bindings.setdefault(container.attr, []).append(value)

        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                args = node.args
                ordered = [*args.posonlyargs, *args.args]
                in_class = isinstance(self.parents.get(node), ast.ClassDef)
                is_static = any(_is_name(d, "staticmethod") for d in getattr(node, "decorator_list", []))
                for i, a in enumerate([*ordered, *args.kwonlyargs]):
                    if i == 0 and in_class and not is_static:
                        self.self_names.add(a.arg)
                    else:
                        self.params.add(a.arg)
                for rest in (args.vararg, args.kwarg):
                    if rest is not None:
                        self.params.add(rest.arg)
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    bind(target, node.value)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                bind(node.target, node.value)
            elif isinstance(node, ast.NamedExpr):
                bind(node.target, node.value)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                bind(node.target, ast.Subscript(value=node.iter, slice=ast.Constant(0)))
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    if item.optional_vars is not None:
                        bind(item.optional_vars, item.context_expr)
            elif isinstance(node, ast.Call) and _is_name(node.func, "setattr") and len(node.args) >= 3:
                attr = node.args[1]
                if isinstance(attr, ast.Constant) and isinstance(attr.value, str):
                    self.attr_bindings.setdefault(attr.value, []).append(node.args[2])
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
                for arg in [*node.args, *[k.value for k in node.keywords]]:
                    hold(node.func.value, arg)
            elif isinstance(node, ast.ClassDef):
                for member in node.body:  # class attributes are read as self.<name> and Class.<name>
                    if isinstance(member, (ast.Assign, ast.AnnAssign)) and member.value is not None:
                        for t in member.targets if isinstance(member, ast.Assign) else [member.target]:
                            if isinstance(t, ast.Name):
                                self.attr_bindings.setdefault(t.id, []).append(member.value)
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                for n in node.names:
                    self.bindings.setdefault(n, [])
            if isinstance(node, ast.Call) and self.resolve(node.func) == "torch.utils.cpp_extension.load_inline":
                parent = self.parents.get(node)
                if isinstance(parent, ast.Assign):
                    for t in parent.targets:
                        if isinstance(t, ast.Name):
                            self.extension_vars.add(t.id)
            if isinstance(node, ast.Call) and self.resolve(node.func) == "torch.utils.cpp_extension.load":
                parent = self.parents.get(node)
                if isinstance(parent, ast.Assign):
                    for t in parent.targets:
                        if isinstance(t, ast.Name):
                            self.extension_vars.add(t.id)

    # -- origin of a value (for the patch rule) ----------------------------------------------
    def origin(self, node: ast.AST | None, depth: int = 0) -> int:
        """How far from this file the object an expression evaluates to may come from."""
        if node is None or depth > 60:
            return UNKNOWN
        key = id(node)
        if key in self._origin_stack:
            return FRESH  # a cycle adds nothing new: the other bindings decide
        self._origin_stack.add(key)
        try:
            return self._origin(node, depth + 1)
        finally:
            self._origin_stack.discard(key)

    def _combine(self, nodes: Iterable[ast.AST | None], depth: int) -> int:
        worst = FRESH
        for n in nodes:
            worst = max(worst, self.origin(n, depth))
            if worst == IMPORTED:
                break
        return worst

    def _origin(self, node: ast.AST, depth: int) -> int:
        if isinstance(node, ast.Constant):
            return FRESH
        if self.resolve(node) is not None:
            return IMPORTED
        if isinstance(node, ast.Name):
            return self._name_origin(node.id, depth)
        if isinstance(node, ast.Attribute):
            held = self._attr_origin(node.attr, depth)
            if isinstance(node.value, ast.Name) and node.value.id in self.self_names:
                return held
            return max(held, self.origin(node.value, depth))
        if isinstance(node, ast.Subscript):
            # a local class's __getitem__ decides what `<obj>[...]` is
            return max(self.origin(node.value, depth), self._combine(_returns(self._methods("__getitem__")), depth))
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return self._combine(node.elts, depth)
        if isinstance(node, ast.Dict):
            return self._combine([*node.values, *[k for k in node.keys if k is not None]], depth)
        if isinstance(node, ast.Starred):
            return self.origin(node.value, depth)
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            return self._combine([node.elt, *[g.iter for g in node.generators]], depth)
        if isinstance(node, ast.DictComp):
            return self._combine([node.key, node.value, *[g.iter for g in node.generators]], depth)
        if isinstance(node, ast.BinOp):
            return self._combine([node.left, node.right], depth)
        if isinstance(node, ast.BoolOp):
            return self._combine(node.values, depth)
        if isinstance(node, ast.IfExp):
            return self._combine([node.body, node.orelse], depth)
        if isinstance(node, ast.NamedExpr):
            return self.origin(node.value, depth)
        if isinstance(node, (ast.UnaryOp, ast.Compare, ast.JoinedStr, ast.Lambda)):
            return FRESH
        if isinstance(node, ast.Call):
            return self._call_origin(node, depth)
        return UNKNOWN

    def _call_origin(self, node: ast.Call, depth: int) -> int:
        func = node.func
        args = [*node.args, *[k.value for k in node.keywords]]
        name = self.resolve(func)
        if name is not None:
            root = name.split(".")[0]
            # torch constructors and extension functions build new objects; other library
            # calls (functools.reduce, copy.copy, ...) may hand back what they were given.
            if root in ("torch", "cuda_extension", "math", "cmath"):
                return FRESH
            return max(PARAM, self._combine(args, depth))
        if isinstance(func, ast.Name):
            if func.id in self.local_classes:
                return FRESH
            if func.id in self.functions:
                return self._combine(_returns(self.functions[func.id]), depth)
            if func.id in PASS_THROUGH_BUILTINS or func.id not in self.bindings:
                return max(FRESH, self._combine(args, depth))
            return (
                self._combine([*_lambda_bodies(self.bindings[func.id]), *args], depth)
                if all(isinstance(v, ast.Lambda) for v in self.bindings[func.id])
                else UNKNOWN
            )
        if isinstance(func, ast.Lambda):
            return self.origin(func.body, depth)
        if isinstance(func, ast.Attribute):
            receiver = self.origin(func.value, depth)
            if isinstance(func.value, ast.Name) and func.value.id in self.self_names:
                methods = self._methods(func.attr)
                if methods:
                    return self._combine(_returns(methods), depth)
                # self.linear(x), self.parameters(): what nn.Module gives back is fresh,
                # unless self.<attr> itself holds something foreign.
                return self._attr_origin(func.attr, depth)
            if receiver == FRESH:
                return FRESH
            return receiver
        return UNKNOWN

    def _name_origin(self, name: str, depth: int) -> int:
        """Origin of a variable over all its bindings in the file, computed once per name."""
        key = ("name", name)
        if key in self._origin_cache:
            return self._origin_cache[key]
        if name in self.self_names or name in self.local_defs or name in self.extension_vars:
            return FRESH
        values = self.bindings.get(name)
        if values is None and name not in self.params:
            return UNKNOWN  # a builtin or a name bound nowhere in the file
        if values and any(v is None for v in values):
            return UNKNOWN
        self._origin_cache[key] = FRESH  # a cycle through this name adds nothing new
        result = max(PARAM if name in self.params else FRESH, self._combine(values or [], depth))
        self._origin_cache[key] = result
        return result

    def _attr_origin(self, attr: str, depth: int) -> int:
        """Origin of what any `<obj>.<attr>` was assigned, computed once per attribute name."""
        key = ("attr", attr)
        if key in self._origin_cache:
            return self._origin_cache[key]
        self._origin_cache[key] = FRESH
        # What a property or a class's __getattr__ hands back is read as `<obj>.<attr>` too.
        computed = [m for m in self._methods(attr) if _is_property(m)] + self._methods("__getattr__")
        result = max(self._combine(self.attr_bindings.get(attr, []), depth), self._combine(_returns(computed), depth))
        self._origin_cache[key] = result
        return result

    def _methods(self, name: str) -> list[ast.AST]:
        out: list[ast.AST] = []
        for cls in self.local_classes.values():
            for item in cls.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == name:
                    out.append(item)
        return out


def _returns(functions: list[ast.AST]) -> list[ast.AST | None]:
    out: list[ast.AST | None] = []
    for fn in functions:
        for node in ast.walk(fn):
            if isinstance(node, ast.Return):
                out.append(node.value if node.value is not None else ast.Constant(None))
            elif isinstance(node, (ast.Yield, ast.YieldFrom)):
                out.append(node.value)
    return out


def _lambda_bodies(values: list[ast.expr | None]) -> list[ast.AST]:
    return [v.body for v in values if isinstance(v, ast.Lambda)]


def _is_property(fn: ast.AST) -> bool:
    decorators = getattr(fn, "decorator_list", [])
    return any(
        (isinstance(d, ast.Name) and d.id in ("property", "cached_property"))
        or (isinstance(d, ast.Attribute) and d.attr in ("cached_property", "getter"))
        for d in decorators
    )


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name

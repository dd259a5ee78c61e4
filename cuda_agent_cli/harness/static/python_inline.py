"""The Python rule on `torch.utils.cpp_extension.load_inline` and `load`: the C++ model_new.py
hands to load_inline, taken out for the C++ checks (cpp.py), and the names and build flags that
go into what those build (generated C++, compiler and linker command lines)."""

from __future__ import annotations

import ast
from typing import Callable

from cuda_agent_cli.harness.static.cpp import BANNED_IN_MACRO
from cuda_agent_cli.harness.static.python_names import BUILD_FLAG_KWARGS, INJECTING_FLAGS, LINKABLE
from cuda_agent_cli.harness.static.python_source import PY_FILE, fold


class InlineSources:
    """Mixin for the Python checker: `inline_cpp` gets the C++ of each load_inline call."""

    add: Callable[[str, str, ast.AST | None], None]
    resolve: Callable[[ast.AST], str | None]
    string_values: dict[str, ast.expr]
    inline_cpp: list[tuple[str, str]]

    def _collect_inline_cpp(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = self.resolve(node.func)
            if name not in ("torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load"):
                continue
            for kw in node.keywords:
                if kw.arg in BUILD_FLAG_KWARGS:
                    self._check_build_flags(kw.value, kw.arg)
                elif kw.arg == "build_directory":
                    self.add(
                        "dynamic_code",
                        "build_directory points the build at files the harness did not "
                        "build (a planted library loads unchecked); leave it out",
                        kw.value,
                    )
                elif kw.arg in ("functions", "name"):
                    self._check_generated_names(kw.value, kw.arg)
            if node.args:
                self._check_generated_names(node.args[0], "name")
            if name != "torch.utils.cpp_extension.load_inline":
                continue
            for kw in node.keywords:
                if kw.arg in ("cpp_sources", "cuda_sources"):
                    text = self._string_of(kw.value, depth=0)
                    if text is None:
                        self.add(
                            "dynamic_code",
                            f"load_inline {kw.arg} is not a literal string, so it cannot be checked",
                            kw.value,
                        )
                    elif text:
                        self.inline_cpp.append((f"{PY_FILE}:{kw.arg}@{node.lineno}", text))
            for i, arg in enumerate(node.args[1:3]):
                text = self._string_of(arg, depth=0)
                label = ("cpp_sources", "cuda_sources")[i]
                if text is None:
                    self.add(
                        "dynamic_code", f"load_inline {label} is not a literal string, so it cannot be checked", arg
                    )
                elif text:
                    self.inline_cpp.append((f"{PY_FILE}:{label}@{node.lineno}", text))

    def _check_generated_names(self, node: ast.AST, what: str) -> None:
        """load_inline writes `name` and `functions` into C++ it generates: identifiers only."""
        items: list[ast.AST] = []
        for _ in range(4):
            if isinstance(node, ast.Name) and node.id in self.string_values:
                node = self.string_values[node.id]
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items = list(node.elts)
        elif isinstance(node, ast.Dict):
            items = [k for k in node.keys if k is not None]
            for v in node.values:
                doc = fold(v, self.string_values)
                if doc is None or any(c in doc for c in '"\\\n'):
                    self.add(
                        "dynamic_code",
                        "load_inline function docstrings go into generated C++: plain "
                        "literal text without quotes or backslashes",
                        v,
                    )
        else:
            items = [node]
        for item in items:
            text = fold(item, self.string_values)
            if text is None or not text.isidentifier():
                self.add(
                    "dynamic_code", f"load_inline {what} goes into generated C++: it must be a literal identifier", item
                )

    def _check_build_flags(self, node: ast.AST, kwarg: str) -> None:
        flags = node.elts if isinstance(node, (ast.List, ast.Tuple)) else [node]
        for flag in flags:
            text = self._string_of(flag, depth=0)
            if text is None:
                self.add("dynamic_code", "build flags that are not literal strings cannot be checked", flag)
                continue
            if not text.strip():
                continue  # KernelBench's template passes [""]
            if text.startswith("-D") and BANNED_IN_MACRO.search(text.partition("=")[2]):
                self.add("token_pasting", f"build flag {text} defines a macro that hides a banned name", flag)
            elif text.startswith("-B") or any(f in text for f in INJECTING_FLAGS):
                self.add("dynamic_code", f"build flag {text} injects code the checks cannot see", flag)
            elif text.startswith("-L") and (not text[2:].startswith("/") or _writable_place(text[2:])):
                self.add(
                    "dynamic_code",
                    f"library path {text} can hold libraries the checks never read; "
                    "link from the CUDA and torch installations",
                    flag,
                )
            elif kwarg == "extra_ldflags" and not (LINKABLE.match(text) or text.startswith(("-O", "-L"))):
                self.add(
                    "dynamic_code",
                    f"link flag {text} brings in native code the checks never read; "
                    "link only the CUDA libraries (-lcublas, -lcudnn, ...)",
                    flag,
                )
            elif kwarg == "extra_include_paths" or text.startswith(("-I", "-isystem", "-iquote")):
                path = text[2:] if text.startswith("-I") else text
                if _writable_place(path):
                    self.add("dynamic_code", f"include path {text} brings in headers the checks never read", flag)

    def _string_of(self, node: ast.AST, depth: int) -> str | None:
        """The literal text of a load_inline source argument, following simple names."""
        if depth > 8:
            return None
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, str) else ("" if node.value is None else None)
        if isinstance(node, (ast.List, ast.Tuple)):
            texts = [self._string_of(e, depth + 1) for e in node.elts]
            known = [t for t in texts if t is not None]
            return "\n".join(known) if len(known) == len(texts) else None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self._string_of(node.left, depth + 1), self._string_of(node.right, depth + 1)
            return None if left is None or right is None else left + right
        if isinstance(node, ast.JoinedStr):
            pieces: list[str] = []
            for v in node.values:
                if isinstance(v, ast.Constant):
                    pieces.append(str(v.value))
                else:
                    return None
            return "".join(pieces)
        if isinstance(node, ast.Name) and node.id in self.string_values:
            return self._string_of(self.string_values[node.id], depth + 1)
        return None


def _writable_place(path: str) -> bool:
    """A directory a candidate can fill with files the checks never read."""
    return "scratch" in path or ".." in path or path.startswith(("/tmp", "/dev/shm", "/var/tmp")) or path in ("", ".")

"""Fingerprints of what a kernel was verified against, read from source text alone (no import).

`check --fast` compares these with the manifest to find stale kernels in well under a second,
so they are computed from the syntax tree: a change of formatting, a comment or a docstring does
not make a kernel stale, a change of code, of a default value or of the call signature does.
Code the class reaches outside its own body (module-level helpers, other modules) is not part of
the fingerprint; the full check re-verifies the kernel against the current reference.
"""

from __future__ import annotations

import ast
import copy
import hashlib
from dataclasses import dataclass
from pathlib import Path

# Files in a kernel folder that are outputs, not sources.
_SKIP_PARTS = {"__pycache__", "build"}


@dataclass(frozen=True)
class ClassFingerprint:
    sha256: str  # the class's syntax tree, without docstrings
    signature: str  # "forward(self, x) ; __init__(self, dim=768)"
    inputs_sha256: str | None  # get_inputs()/get_init_inputs() of the module, when it has them


def _without_docstrings(node: ast.AST) -> ast.AST:
    node = copy.deepcopy(node)
    for n in ast.walk(node):
        body = getattr(n, "body", None)
        if (
            isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            n.body = body[1:] or [ast.Pass()]
    return node


def _digest(nodes: list[ast.AST]) -> str:
    h = hashlib.sha256()
    for n in nodes:
        h.update(ast.dump(_without_docstrings(n), include_attributes=False).encode())
    return h.hexdigest()


def _method_signature(cls: ast.ClassDef, name: str) -> str | None:
    fn = next(
        (n for n in reversed(cls.body) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name),
        None,
    )
    if fn is None:
        return None
    ret = f" -> {ast.unparse(fn.returns)}" if fn.returns is not None else ""
    return f"{name}({ast.unparse(fn.args)}){ret}"


def class_fingerprint(module_source: str, class_name: str) -> ClassFingerprint | None:
    """The fingerprint of top-level `class_name` in `module_source`; None when it is not there
    (or the module does not parse)."""
    try:
        tree = ast.parse(module_source)
    except SyntaxError:
        return None
    # Python keeps the last definition of a name; so does the fingerprint.
    cls = next((n for n in reversed(tree.body) if isinstance(n, ast.ClassDef) and n.name == class_name), None)
    if cls is None:
        return None
    parts = [s for s in (_method_signature(cls, "forward"), _method_signature(cls, "__init__")) if s]
    inputs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in ("get_inputs", "get_init_inputs")]
    return ClassFingerprint(_digest([cls]), " ; ".join(parts), _digest(list[ast.AST](inputs)) if inputs else None)


def class_digest(module_source: str, class_name: str) -> "str | None":
    """sha256 of the last top-level class `class_name` of `module_source`, docstrings left out,
    as normalized source text (ast.unparse: formatting and comments do not count); None where
    the module does not parse or has no such class. The integrated loader carries a copy of this
    function (it runs where cuda-agent is not installed) and compares the class it is handed
    with the digest verified.json records, so it stays self-contained and stable across Python
    versions for ordinary code."""
    import ast as _ast
    import hashlib as _hashlib

    try:
        tree = _ast.parse(module_source)
    except SyntaxError:
        return None
    found = None
    for node in tree.body:
        if isinstance(node, _ast.ClassDef) and node.name == class_name:
            found = node
    if found is None:
        return None
    for part in _ast.walk(found):
        body = getattr(part, "body", None)
        if (
            isinstance(part, (_ast.ClassDef, _ast.FunctionDef, _ast.AsyncFunctionDef))
            and body
            and isinstance(body[0], _ast.Expr)
            and isinstance(body[0].value, _ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            part.body = body[1:] or [_ast.Pass()]
    return _hashlib.sha256(_ast.unparse(found).encode("utf-8")).hexdigest()


def integration_present(module_source: str, class_name: str) -> bool:
    """Whether the module still hands `class_name` to its loader (the lines apply adds)."""
    return any(
        "_cuda_agent_runpy.run_path" in line and f'["install"]({class_name})' in line
        for line in module_source.splitlines()
    )


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def folder_hashes(folder: Path) -> dict[str, str]:
    """sha256 of every source file in a kernel folder, by folder-relative POSIX path."""
    out: dict[str, str] = {}
    if not folder.is_dir():
        return out
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder)
        if p.is_file() and not (set(rel.parts) & _SKIP_PARTS) and p.suffix != ".pyc":
            out[rel.as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def unpatched_candidates(source: str, class_name: str) -> list[str]:
    """The module texts that applying a kernel to `class_name` could have turned into `source`.

    Applying inserts two blank lines and five lines after the class, and two more blank lines
    when code followed the class directly; both originals are returned, so a module hash
    recorded before the patch can be compared with today's file."""
    lines = source.splitlines(keepends=True)
    install = f'["install"]({class_name})'
    end = next((i for i, ln in enumerate(lines) if install in ln and "_cuda_agent_runpy.run_path" in ln), None)
    if end is None or end < 4:
        return [source]
    start = end - 4
    if not lines[start].startswith("# cuda-agent:"):
        return [source]
    before, after = lines[:start], lines[end + 1 :]
    if len(before) >= 2 and not before[-1].strip() and not before[-2].strip():
        before = before[:-2]
    out = ["".join(before + after)]
    if len(after) >= 3 and not after[0].strip() and not after[1].strip() and after[2].strip():
        out.append("".join(before + after[2:]))
    return out

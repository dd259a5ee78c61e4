"""What the Python rules share about model_new.py's source: the name findings give it, whether a
node is a bare name, and the string an expression of literals spells."""

from __future__ import annotations

import ast

PY_FILE = "model_new.py"


def is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def fold(node: ast.AST, values: dict[str, ast.expr], depth: int = 0) -> str | None:
    """The string an expression of literals, concatenations and names bound to them spells."""
    if depth > 8:
        return None
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        left, right = fold(node.left, values, depth + 1), fold(node.right, values, depth + 1)
        if isinstance(node.op, ast.Add):
            return None if left is None or right is None else left + right
        return left
    if isinstance(node, ast.JoinedStr):
        parts = [fold(v, values, depth + 1) if isinstance(v, ast.Constant) else "" for v in node.values]
        return "".join(p or "" for p in parts)
    if isinstance(node, ast.Name) and node.id in values:
        return fold(values[node.id], values, depth + 1)
    return None

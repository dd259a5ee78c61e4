"""What a reference file lacks for the harness, read from its source without running it."""

from __future__ import annotations

import ast


def reference_problems(source: str, filename: str = "model.py") -> list[str]:
    """What a reference file lacks for the harness (class Model, get_inputs), read from its AST."""
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        return [f"{filename} line {exc.lineno}: {exc.msg}"]
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    problems = []
    if "Model" not in names:
        problems.append(f"{filename} defines no class Model")
    if "get_inputs" not in names:
        problems.append(f"{filename} defines no get_inputs()")
    return problems

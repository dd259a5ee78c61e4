"""The standalone model.py the harness runs for a Task: class Model, get_inputs(), get_init_inputs().

A self-contained module is copied in, so the agent reads the real code; a module that needs its
package is imported by absolute path instead (the harness runs with a clean environment, so the
generated file adds the repository to sys.path itself) and the class source is quoted in it.
"""

from __future__ import annotations

import ast
import textwrap

from cuda_agent_cli.task.inputs import Arg, ObjectSpec, objects_in, value_to_python
from cuda_agent_cli.task.target import Task


def defines_conflicting_names(source: str, class_name: str) -> bool:
    """A copied module must not already define `Model` (for another class) or `ModelNew`."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return True
    names = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    names |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    return ("Model" in names and class_name != "Model") or "ModelNew" in names


def _split(args: tuple[Arg, ...]) -> tuple[list[Arg], list[Arg]]:
    return [a for a in args if a.name is None], [a for a in args if a.name is not None]


def reference_source(task: Task) -> str:
    """The standalone model.py the harness runs: class Model, get_inputs(), get_init_inputs()."""
    t = task.target
    cls = t.class_name
    pos, named = _split(task.call.args)
    init_named = [] if task.uses_module_inputs else _split(task.call.init)[1]
    needs_wrapper = bool(named) or bool(init_named) or cls != "Model"
    parts: list[str] = []
    if task.standalone:
        parts.append(task.module_source.rstrip() + "\n")
        parts.append(f"\n\n# ---- added by cuda-agent: the harness's entry points for {t.display} ----\n")
        if needs_wrapper:
            parts.append("import torch\n")
        base = cls
    else:
        paths = [str(p) for p in t.import_paths]
        quoted = textwrap.indent(task.class_source.rstrip(), "# ")
        parts.append(
            f'"""Reference for {t.display}, imported from the repository at {t.repo_root}.\n\n'
            "The class needs the rest of its package, so it is imported, not copied; its source\n"
            'is quoted below for reading."""\n\n'
            "import os\n"
            "import sys\n\n"
            "# The reference is the original code, even where cuda-agent integrated a kernel before.\n"
            'os.environ["CUDA_AGENT_DISABLE_KERNELS"] = "1"\n'
            f"_REPOSITORY_PATHS = {paths!r}\n"
            "for _path in reversed(_REPOSITORY_PATHS):\n"
            "    if _path not in sys.path:\n"
            "        sys.path.insert(0, _path)\n\n"
            "import torch\n\n"
            f"from {t.module_name} import {cls} as _Reference\n"
        )
        if task.uses_module_inputs:
            parts.append(
                f"from {t.module_name} import get_inputs, get_init_inputs\n"
                if _has_init_inputs(task)
                else f"from {t.module_name} import get_inputs\n"
            )
        parts.append(f"\n# The class, from {task.file}:{task.class_start}\n{quoted}\n")
        base = "_Reference"
        needs_wrapper = True

    def name_of(o: ObjectSpec) -> str:
        if task.standalone and o.module == t.module_name:
            return o.qualname  # the module's own code is in this file
        return f"_cuda_agent_object({o.module!r}, {o.qualname!r})"

    def py(a: Arg) -> str:
        return value_to_python(a.value, name_of)

    if any(
        name_of(o).startswith("_cuda_agent_object")
        for o in objects_in(a.value for a in task.call.args + task.call.init)
    ):
        parts.append(_OBJECT_HELPER)
    if needs_wrapper:
        parts.append(f"\n\nclass Model({base}):\n")
        if named:
            names = [a.name for a in named]
            parts.append(
                "    # get_inputs() lists keyword arguments after the positional ones, in this order.\n"
                f"    _KEYWORDS = {names!r}\n\n"
                "    def forward(self, *inputs):\n"
                f"        n = len(inputs) - {len(names)}\n"
                "        return super().forward(*inputs[:n], **dict(zip(self._KEYWORDS, inputs[n:])))\n"
            )
        else:
            parts.append(f'    """The harness\'s name for {cls}."""\n')
        if init_named:
            # KernelBench builds Model(*get_init_inputs()); keyword constructor arguments are bound here.
            kw = ", ".join(f"{a.name}={py(a)}" for a in init_named)
            parts.append(f"\n    def __init__(self, *args):\n        super().__init__(*args, {kw})\n")
    if not task.uses_module_inputs:
        init_pos = _split(task.call.init)[0]
        parts.append("\n\ndef get_init_inputs():\n")
        parts.append(f"    return [{', '.join(py(a) for a in init_pos)}]\n")
        parts.append("\n\ndef get_inputs():\n")
        items = [py(a) for a in pos + named]
        body = ",\n        ".join(items)
        parts.append(f"    return [\n        {body},\n    ]\n" if items else "    return []\n")
    elif not _has_init_inputs(task):
        parts.append("\n\ndef get_init_inputs():\n    return []\n")
    return "".join(parts)


_OBJECT_HELPER = '''

def _cuda_agent_object(module, qualname):
    """An object of the user's code that the class is constructed or called with."""
    import importlib

    found = importlib.import_module(module)
    for name in qualname.split("."):
        found = getattr(found, name)
    return found
'''


def _has_init_inputs(task: Task) -> bool:
    try:
        tree = ast.parse(task.module_source)
    except SyntaxError:
        return False
    return any(isinstance(n, ast.FunctionDef) and n.name == "get_init_inputs" for n in tree.body)

"""Target spec -> Task: which class, how to build it, how to make its inputs, and the reference.

`path/to/file.py::Class` or `pkg.module:Class`. The class is imported in a subprocess started in
the user's repository (their module may do anything at import time; cuda-agent's own process
must not be affected), with the same sys.path a user of the package would have, so classes that
import the rest of their package work.

The harness needs a standalone `model.py` with `class Model`, `get_inputs()` and
`get_init_inputs()`. A self-contained module is copied in, so the agent reads the real code;
a module that needs its package is imported by absolute path instead (the harness runs with a
clean environment, so the generated file adds the repository to sys.path itself) and the class
source is quoted in it for reading.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from cuda_agent_cli.capture import DESCRIBE_SOURCE
from cuda_agent_cli.errors import InputSpecError, TargetError
from cuda_agent_cli.inputs_spec import Arg, CallSpec, call_from_json, call_to_json, value_to_python

TARGET_HINT = "write it as path/to/file.py::ClassName or package.module:ClassName"
INPUTS_HINT = ("add get_inputs() (and get_init_inputs()) to the module, pass --inputs "
               "\"x=float32[8,1024]\", or --capture \"python your_script.py\"")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Target:
    """Where the class lives and how Python finds it."""

    text: str                 # as the user wrote it
    class_name: str
    module_name: str          # dotted import name
    file: Path | None         # the module file (None until probed for the pkg.module form)
    import_paths: tuple[Path, ...]  # sys.path entries, first wins
    repo_root: Path           # git root, else the nearest pyproject.toml's folder, else import root

    @property
    def display(self) -> str:
        if self.file is not None:
            try:
                return f"{self.file.relative_to(self.repo_root)}::{self.class_name}"
            except ValueError:
                return f"{self.file}::{self.class_name}"
        return self.text


@dataclass(frozen=True)
class Task:
    """Everything later stages need about the reference, computed once."""

    target: Target
    file: Path
    call: CallSpec
    forward_params: tuple[str, ...]
    class_source: str
    class_start: int          # 1-based first line of the class statement (decorators included)
    class_end: int            # 1-based last line
    module_source: str
    module_sha256: str
    standalone: bool
    uses_module_inputs: bool  # get_inputs() of the module itself is the input source
    parameters: tuple[tuple[str, str, tuple[int, ...]], ...] = field(default=())  # name, dtype, shape
    training_sensitive: bool = False  # has dropout/batch norm: output depends on .training
    reference_source: str = ""

    @property
    def class_snake(self) -> str:
        return snake_case(self.target.class_name)


def snake_case(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    s = re.sub(r"(?<=[A-Z])([A-Z][a-z])", r"_\1", s)
    return s.lower()


# ---------------------------------------------------------------- target parsing (pure)

def find_repo_root(start: Path) -> Path | None:
    """The nearest folder at or above `start` that holds .git."""
    for d in (start, *start.parents):
        if (d / ".git").exists():
            return d
    return None


def _package_root(file: Path) -> tuple[str, Path]:
    """(dotted module name, sys.path entry) from the chain of __init__.py above `file`."""
    parts = [file.stem]
    d = file.parent
    while (d / "__init__.py").is_file() and _IDENT.match(d.name):
        parts.insert(0, d.name)
        d = d.parent
    return ".".join(parts), d


def parse_target(text: str, cwd: Path) -> Target:
    """Split and check the target text; the file must exist (the class is checked by the probe)."""
    text = text.strip()
    if "::" in text:
        path_text, _, cls = text.rpartition("::")
        if not path_text or not _IDENT.match(cls):
            raise TargetError(f"`{text}` is not a valid target", TARGET_HINT)
        file = (cwd / path_text).resolve()
        if not file.is_file():
            raise TargetError(f"{path_text}: no such file", "check the path (it is relative to the current folder)")
        if file.suffix != ".py":
            raise TargetError(f"{path_text} is not a Python file", TARGET_HINT)
        module, root = _package_root(file)
        repo = find_repo_root(file.parent)
        if repo is None:
            pyproject = next((d for d in file.parents if (d / "pyproject.toml").is_file()), None)
            repo = pyproject or root
        paths = [root]
        if repo in root.parents:
            paths.append(repo)  # absolute imports of other top-level folders of the repository
        return Target(text, cls, module, file, tuple(paths), repo)
    if ":" in text:
        module, _, cls = text.rpartition(":")
        if not all(_IDENT.match(p) for p in module.split(".")) or not _IDENT.match(cls):
            raise TargetError(f"`{text}` is not a valid target", TARGET_HINT)
        repo = find_repo_root(cwd) or cwd
        paths = [cwd] if cwd == repo else [cwd, repo]
        return Target(text, cls, module, None, tuple(paths), repo)
    raise TargetError(f"`{text}` does not name a class", TARGET_HINT)


# ---------------------------------------------------------------- the probe (runs in a subprocess)

_PROBE = DESCRIBE_SOURCE + r'''
import ast, importlib, importlib.util, inspect, json, os, sys, traceback

req = json.load(open(sys.argv[1]))
out_path = sys.argv[2]
result = {}

def done(**kw):
    result.update(kw)
    with open(out_path, "w") as f:
        json.dump(result, f)
    sys.exit(0)

def last_line(exc):
    return f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:400]

for p in reversed(req["paths"]):
    if p in sys.path:
        sys.path.remove(p)
    sys.path.insert(0, p)
try:
    import torch
except Exception as exc:
    done(error="torch", detail=last_line(exc))
try:
    mod = importlib.import_module(req["module"])
except SystemExit as exc:
    done(error="import", detail=f"the module called exit({exc.code}) while being imported")
except BaseException as exc:
    done(error="import", detail=last_line(exc))
mod_file = getattr(mod, "__file__", None)
if not mod_file:
    done(error="import", detail=f"{req['module']} is a namespace package, not a module file")
result["file"] = os.path.realpath(mod_file)
cls = getattr(mod, req["class"], None)
modules = sorted(n for n, v in vars(mod).items()
                 if isinstance(v, type) and issubclass(v, torch.nn.Module) and v.__module__ == mod.__name__)
if cls is None:
    done(error="class", detail="", candidates=modules)
if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
    done(error="not_module", detail=type(cls).__name__, candidates=modules)
try:
    lines, start = inspect.getsourcelines(cls)
    result["class_source"] = "".join(lines)
    result["class_start"] = start
    result["class_end"] = start + len(lines) - 1
except (OSError, TypeError) as exc:
    done(error="source", detail=last_line(exc))
try:
    sig = inspect.signature(cls.forward)
    result["forward_params"] = [n for n in sig.parameters if n != "self"]
except (TypeError, ValueError):
    result["forward_params"] = []

# Absolute imports that resolve inside the repository mean the module needs its package.
repo = os.path.realpath(req["repo"])
local = False
try:
    tree = ast.parse(open(mod_file).read())
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                local = True
            elif node.module:
                names.append(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            names += [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.Name) and node.id == "__file__":
            local = True
        for n in names:
            spec = importlib.util.find_spec(n)
            origin = getattr(spec, "origin", None) or ""
            locs = list(getattr(spec, "submodule_search_locations", None) or [])
            if any(os.path.realpath(x).startswith(repo + os.sep) for x in [origin] + locs if x):
                local = True
except Exception:
    local = True
result["standalone"] = not local

call = req.get("call")
if call is None:
    if callable(getattr(mod, "get_inputs", None)):
        try:
            init = list(mod.get_init_inputs()) if callable(getattr(mod, "get_init_inputs", None)) else []
            args = list(mod.get_inputs())
            call = {"source": "get_inputs", "init": _ca_describe_call(init, {}, "get_init_inputs()"),
                    "args": _ca_describe_call(args, {}, "get_inputs()")}
        except TypeError as exc:
            done(error="inputs", detail=str(exc))
        except BaseException as exc:
            done(error="get_inputs", detail=last_line(exc))
        result["module_inputs"] = True
    else:
        done(error="no_inputs", detail="")
result["call"] = call

def build(v):
    if "tensor" in v:
        t = v["tensor"]
        dt = getattr(torch, t["dtype"])
        if dt.is_floating_point:
            return torch.randn(t["shape"], dtype=dt)
        lo, hi = (t.get("range") or [0, 2])
        return torch.randint(int(lo), int(hi), t["shape"], dtype=dt) if dt != torch.bool else torch.rand(t["shape"]) < 0.5
    if "list" in v:
        return [build(x) for x in v["list"]]
    if "tuple" in v:
        return tuple(build(x) for x in v["tuple"])
    return v["value"]

try:
    if result.get("module_inputs"):
        init = list(mod.get_init_inputs()) if callable(getattr(mod, "get_init_inputs", None)) else []
        model = cls(*init)
    else:
        pos = [build(a) for a in call["init"] if a.get("name") is None]
        kw = {a["name"]: build(a) for a in call["init"] if a.get("name") is not None}
        model = cls(*pos, **kw)
except BaseException as exc:
    done(error="construct", detail=last_line(exc))
result["parameters"] = [[n, str(t.dtype).replace("torch.", ""), list(t.shape)]
                        for n, t in model.state_dict().items()]
sensitive = (torch.nn.modules.dropout._DropoutNd, torch.nn.modules.batchnorm._BatchNorm)
result["training_sensitive"] = any(isinstance(m, sensitive) for m in model.modules())
done(ok=True)
'''


def _run_probe(target: Target, call: CallSpec | None, timeout: float) -> dict:
    request = {
        "paths": [str(p) for p in target.import_paths],
        "module": target.module_name,
        "class": target.class_name,
        "repo": str(target.repo_root),
        "call": call_to_json(call) if call is not None else None,
    }
    with tempfile.TemporaryDirectory(prefix="cuda-agent-probe-") as tmp:
        req_path, out_path = Path(tmp) / "req.json", Path(tmp) / "out.json"
        req_path.write_text(json.dumps(request))
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        # A module integrated before must be seen as the user wrote it, not through its kernel.
        env["CUDA_AGENT_DISABLE_KERNELS"] = "1"
        try:
            proc = subprocess.run(
                [sys.executable, "-c", _PROBE, str(req_path), str(out_path)],
                cwd=target.repo_root, env=env, stdin=subprocess.DEVNULL,
                capture_output=True, text=True, timeout=timeout, start_new_session=True,
            )
        except subprocess.TimeoutExpired:
            raise TargetError(f"importing {target.display} took more than {timeout:.0f} s",
                              "make module import cheap, or move slow work under `if __name__ == \"__main__\":`") from None
        if not out_path.is_file():
            tail = [ln for ln in (proc.stderr or "").splitlines() if ln.strip()]
            raise TargetError(f"importing {target.display} crashed the interpreter (exit {proc.returncode})"
                              + (f": {tail[-1][:300]}" if tail else ""), "run `python -c \"import "
                              f"{target.module_name}\"` in the repository to see why")
        return json.loads(out_path.read_text())


def _probe_error(target: Target, r: dict) -> Exception:
    kind, detail = r["error"], r.get("detail", "")
    name = target.class_name
    if kind == "torch":
        from cuda_agent_cli.errors import EnvironmentMissing
        return EnvironmentMissing(f"cannot import torch: {detail}", "pip install torch")
    if kind == "import":
        return TargetError(f"cannot import {target.module_name} from {target.repo_root}: {detail}",
                           "make the module importable from the repository root (missing dependency or path?)")
    if kind == "class":
        cands = r.get("candidates") or []
        hint = f"classes there: {', '.join(cands)}" if cands else "check the class name (it is case-sensitive)"
        return TargetError(f"{target.module_name} has no class `{name}`", hint)
    if kind == "not_module":
        return TargetError(f"`{name}` in {target.module_name} is a {detail}, not a torch.nn.Module subclass",
                           "point at the nn.Module class to optimize")
    if kind == "source":
        return TargetError(f"cannot read the source of {name}: {detail}", "the class must be defined in a .py file")
    if kind == "no_inputs":
        return InputSpecError(f"no way to make inputs for {name}", INPUTS_HINT)
    if kind == "inputs":
        return InputSpecError(f"inputs of {name} cannot be described: {detail}", INPUTS_HINT)
    if kind == "get_inputs":
        return InputSpecError(f"get_inputs()/get_init_inputs() of {target.module_name} failed: {detail}",
                              "fix them, or pass --inputs")
    if kind == "construct":
        return TargetError(f"{name} fails to construct: {detail}",
                           "give constructor arguments with get_init_inputs() or --inputs \"...; init: ARGS\"")
    return TargetError(f"cannot load {target.display}: {kind} {detail}", TARGET_HINT)


# ---------------------------------------------------------------- resolve

def resolve_task(
    target_text: str,
    cwd: Path,
    inputs: CallSpec | None = None,
    capture_command: str | None = None,
    timeout: float = 180.0,
) -> Task:
    """Parse, import and check the target; explicit inputs (--capture, --inputs) win over get_inputs()."""
    target = parse_target(target_text, cwd)
    call = inputs
    if capture_command:
        if target.file is None:
            first = _run_probe(target, None, timeout)
            if "file" not in first:
                raise _probe_error(target, first)
            target = _with_file(target, Path(first["file"]))
        from cuda_agent_cli.capture import capture_call

        call = capture_call(capture_command, target.file, target.class_name, cwd)
    r = _run_probe(target, call, timeout)
    if "file" in r and target.file is None:
        target = _with_file(target, Path(r["file"]))
    if r.get("error"):
        raise _probe_error(target, r)
    file = Path(r["file"])
    source = file.read_text()
    final_call = positional_where_possible(call_from_json(r["call"]) if call is None else call,
                                           tuple(r.get("forward_params") or ()))
    task = Task(
        target=target,
        file=file,
        call=final_call,
        forward_params=tuple(r.get("forward_params") or ()),
        class_source=r["class_source"],
        class_start=int(r["class_start"]),
        class_end=int(r["class_end"]),
        module_source=source,
        module_sha256=hashlib.sha256(source.encode()).hexdigest(),
        standalone=bool(r["standalone"]) and not _defines_conflicting_names(source, target.class_name),
        uses_module_inputs=bool(r.get("module_inputs")),
        parameters=tuple((n, d, tuple(s)) for n, d, s in r.get("parameters") or ()),
        training_sensitive=bool(r.get("training_sensitive")),
    )
    return _with_reference(task)


def positional_where_possible(call: CallSpec, forward_params: tuple[str, ...]) -> CallSpec:
    """Named forward arguments that sit in signature order become positional (simpler reference)."""
    from dataclasses import replace

    args = list(call.args)
    i = 0
    while i < len(args) and args[i].name is None:
        i += 1
    while i < len(args) and i < len(forward_params) and args[i].name == forward_params[i]:
        args[i] = Arg(None, args[i].value)
        i += 1
    return replace(call, args=tuple(args))


def _with_file(target: Target, file: Path) -> Target:
    return Target(target.text, target.class_name, target.module_name, file.resolve(),
                  target.import_paths, target.repo_root)


def _with_reference(task: Task) -> Task:
    from dataclasses import replace

    return replace(task, reference_source=reference_source(task))


def _defines_conflicting_names(source: str, class_name: str) -> bool:
    """A copied module must not already define `Model` (for another class) or `ModelNew`."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return True
    names = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    names |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    return ("Model" in names and class_name != "Model") or "ModelNew" in names


# ---------------------------------------------------------------- the generated model.py

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
            parts.append(f"from {t.module_name} import get_inputs, get_init_inputs\n" if _has_init_inputs(task)
                         else f"from {t.module_name} import get_inputs\n")
        parts.append(f"\n# The class, from {task.file}:{task.class_start}\n{quoted}\n")
        base = "_Reference"
        needs_wrapper = True
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
            kw = ", ".join(f"{a.name}={value_to_python(a.value)}" for a in init_named)
            parts.append(
                "\n    def __init__(self, *args):\n"
                f"        super().__init__(*args, {kw})\n"
            )
    if not task.uses_module_inputs:
        init_pos = _split(task.call.init)[0]
        parts.append("\n\ndef get_init_inputs():\n")
        parts.append(f"    return [{', '.join(value_to_python(a.value) for a in init_pos)}]\n")
        parts.append("\n\ndef get_inputs():\n")
        items = [value_to_python(a.value) for a in pos + named]
        body = ",\n        ".join(items)
        parts.append(f"    return [\n        {body},\n    ]\n" if items else "    return []\n")
    elif not _has_init_inputs(task):
        parts.append("\n\ndef get_init_inputs():\n    return []\n")
    return "".join(parts)


def _has_init_inputs(task: Task) -> bool:
    try:
        tree = ast.parse(task.module_source)
    except SyntaxError:
        return False
    return any(isinstance(n, ast.FunctionDef) and n.name == "get_init_inputs" for n in tree.body)

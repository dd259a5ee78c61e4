"""The probe: `python -m cuda_agent_cli.task.probe REQUEST.json OUT.json`, in the user's repository.

It imports the target class the way a user of the package would, and writes what resolving the
task needs (the class source and lines, forward's parameters, whether the module is standalone,
the call to optimize for, the parameters, dropout/batch norm) as one JSON object, or an `error`
kind that task/resolve.py turns into one line. It runs in a subprocess so nothing the user's
module does at import time reaches cuda-agent's own process; it uses the standard library and
torch only, and never raises: every failure is an answer.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import json
import os
import sys
from typing import Any, NoReturn

from cuda_agent_cli.task.describe import describe_call


class _Probe:
    def __init__(self, out_path: str) -> None:
        self.out_path = out_path
        self.result: dict[str, Any] = {}

    def done(self, **kw: Any) -> NoReturn:
        self.result.update(kw)
        with open(self.out_path, "w") as f:
            json.dump(self.result, f)
        sys.exit(0)


def _last_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:400]


def _needs_its_package(mod_file: str, repo: str) -> bool:
    """Absolute imports that resolve inside the repository mean the module needs its package."""
    try:
        tree = ast.parse(open(mod_file).read())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    return True
                if node.module:
                    names.append(node.module.split(".")[0])
            elif isinstance(node, ast.Import):
                names += [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.Name) and node.id == "__file__":
                return True
            for n in names:
                spec = importlib.util.find_spec(n)
                origin = getattr(spec, "origin", None) or ""
                locs = list(getattr(spec, "submodule_search_locations", None) or [])
                if any(os.path.realpath(x).startswith(repo + os.sep) for x in [origin] + locs if x):
                    return True
    except Exception:
        return True
    return False


def _build(torch: Any, v: dict[str, Any]) -> Any:
    """A random value of the described shape and dtype (the constructor's tensor arguments)."""
    if "tensor" in v:
        t = v["tensor"]
        dt = getattr(torch, t["dtype"])
        if dt.is_floating_point:
            return torch.randn(t["shape"], dtype=dt)
        lo, hi = t.get("range") or [0, 2]
        return (
            torch.randint(int(lo), int(hi), t["shape"], dtype=dt) if dt != torch.bool else torch.rand(t["shape"]) < 0.5
        )
    if "list" in v:
        return [_build(torch, x) for x in v["list"]]
    if "tuple" in v:
        return tuple(_build(torch, x) for x in v["tuple"])
    if "object" in v:
        o = v["object"]
        found: Any = importlib.import_module(o["module"])
        for name in o["qualname"].split("."):
            if not hasattr(found, name):
                raise ValueError(f"`{o['qualname']}` is not defined in {o['module']} (names are looked up there)")
            found = getattr(found, name)
        if not o.get("call", True):
            return found
        args = o.get("args") or []
        return found(
            *[_build(torch, a) for a in args if a.get("name") is None],
            **{a["name"]: _build(torch, a) for a in args if a.get("name") is not None},
        )
    return v["value"]


def probe(req: dict[str, Any], out: _Probe) -> NoReturn:
    result = out.result
    for p in reversed(req["paths"]):
        if p in sys.path:
            sys.path.remove(p)
        sys.path.insert(0, p)
    try:
        import torch
    except Exception as exc:
        out.done(error="torch", detail=_last_line(exc))
    try:
        mod = importlib.import_module(req["module"])
    except SystemExit as exc:
        out.done(error="import", detail=f"the module called exit({exc.code}) while being imported")
    except BaseException as exc:
        out.done(error="import", detail=_last_line(exc))
    mod_file = getattr(mod, "__file__", None)
    if not mod_file:
        out.done(error="import", detail=f"{req['module']} is a namespace package, not a module file")
    result["file"] = os.path.realpath(mod_file)
    cls = getattr(mod, req["class"], None)
    modules = sorted(
        n
        for n, v in vars(mod).items()
        if isinstance(v, type) and issubclass(v, torch.nn.Module) and v.__module__ == mod.__name__
    )
    if cls is None:
        out.done(error="class", detail="", candidates=modules)
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        out.done(error="not_module", detail=type(cls).__name__, candidates=modules)
    try:
        lines, start = inspect.getsourcelines(cls)
        result["class_source"] = "".join(lines)
        result["class_start"] = start
        result["class_end"] = start + len(lines) - 1
    except (OSError, TypeError) as exc:
        out.done(error="source", detail=_last_line(exc))
    try:
        sig = inspect.signature(cls.forward)
        result["forward_params"] = [n for n in sig.parameters if n != "self"]
    except (TypeError, ValueError):
        result["forward_params"] = []
    result["standalone"] = not _needs_its_package(mod_file, os.path.realpath(req["repo"]))

    call = req.get("call")
    if call is None:
        if callable(getattr(mod, "get_inputs", None)):
            try:
                init = list(mod.get_init_inputs()) if callable(getattr(mod, "get_init_inputs", None)) else []
                args = list(mod.get_inputs())
                call = {
                    "source": "get_inputs",
                    "init": describe_call(init, {}, "get_init_inputs()"),
                    "args": describe_call(args, {}, "get_inputs()"),
                }
            except TypeError as exc:
                out.done(error="inputs", detail=str(exc))
            except BaseException as exc:
                out.done(error="get_inputs", detail=_last_line(exc))
            result["module_inputs"] = True
        else:
            out.done(error="no_inputs", detail="")
    result["call"] = call

    try:
        if result.get("module_inputs"):
            init = list(mod.get_init_inputs()) if callable(getattr(mod, "get_init_inputs", None)) else []
            model = cls(*init)
        else:
            pos = [_build(torch, a) for a in call["init"] if a.get("name") is None]
            kw = {a["name"]: _build(torch, a) for a in call["init"] if a.get("name") is not None}
            model = cls(*pos, **kw)
    except BaseException as exc:
        out.done(error="construct", detail=_last_line(exc))
    result["parameters"] = [
        [n, str(t.dtype).replace("torch.", ""), list(t.shape)] for n, t in model.state_dict().items()
    ]
    sensitive = (torch.nn.modules.dropout._DropoutNd, torch.nn.modules.batchnorm._BatchNorm)
    result["training_sensitive"] = any(isinstance(m, sensitive) for m in model.modules())
    out.done(ok=True)


def main(argv: list[str]) -> NoReturn:
    with open(argv[0]) as f:
        req = json.load(f)
    probe(req, _Probe(argv[1]))


if __name__ == "__main__":
    main(sys.argv[1:])

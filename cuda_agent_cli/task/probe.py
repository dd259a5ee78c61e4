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
    first = _case(torch, mod, cls, call, req.get("device"), bool(result.get("module_inputs")), out, "")
    model = first.pop("_model")
    result.update(first)
    sensitive = (torch.nn.modules.dropout._DropoutNd, torch.nn.modules.batchnorm._BatchNorm)
    result["training_sensitive"] = any(isinstance(m, sensitive) for m in model.modules())
    more = []
    for i, extra in enumerate(req.get("more") or []):
        found = _case(torch, mod, cls, extra, req.get("device"), False, out, f"shape {i + 2} ({_short(extra)}): ")
        found.pop("_model")
        more.append(found)
    result["more"] = more
    out.done(ok=True)


def _short(call: dict[str, Any]) -> str:
    shapes = ["x".join(str(d) for d in a["tensor"]["shape"]) for a in call.get("args") or [] if "tensor" in a]
    return ", ".join(shapes) or "no tensors"


def _case(
    torch: Any,
    mod: Any,
    cls: Any,
    call: dict[str, Any],
    device: str | None,
    module_inputs: bool,
    out: _Probe,
    where: str,
) -> dict[str, Any]:
    """Construct the class for one call, list its tensors and run its forward once."""
    try:
        if module_inputs:
            init = list(mod.get_init_inputs()) if callable(getattr(mod, "get_init_inputs", None)) else []
            model = cls(*init)
        else:
            pos = [_build(torch, a) for a in call["init"] if a.get("name") is None]
            kw = {a["name"]: _build(torch, a) for a in call["init"] if a.get("name") is not None}
            model = cls(*pos, **kw)
    except BaseException as exc:
        out.done(error="construct", detail=where + _last_line(exc))
    # Every tensor the module holds (a buffer it does not save included): what the kernel lends.
    tensors = [*model.named_parameters(), *model.named_buffers()]
    found: dict[str, Any] = {
        "parameters": [[n, str(t.dtype).replace("torch.", ""), list(t.shape)] for n, t in tensors],
        "_model": model,
    }
    found["output"] = _run_reference(torch, mod, model, call, device, module_inputs, out, where)
    return found


def _device(torch: Any, wanted: str | None, call: dict[str, Any]) -> str:
    """The device the session will run on: the one asked for, else one the inputs name, else a
    GPU when there is one."""
    if wanted:
        return "cuda" if wanted.startswith("cuda") else "cpu"
    for a in call.get("args") or []:
        if str((a.get("tensor") or {}).get("device", "")).startswith("cuda"):
            return "cuda"
    return "cuda" if torch.cuda.is_available() else "cpu"


def describe_output(torch: Any, out: Any) -> dict[str, Any] | str:
    """{"kind": "tensor"|"tuple"|"list", "tensors": [...]} for what a forward returned, or what
    is wrong with it (a kernel replaces a forward that returns tensors)."""
    items = list(out) if isinstance(out, (tuple, list)) else [out]
    kind = "tuple" if isinstance(out, tuple) else "list" if isinstance(out, list) else "tensor"
    if not items:
        return f"forward returned an empty {kind}"
    for i, t in enumerate(items):
        if not isinstance(t, torch.Tensor):
            what = "None" if t is None else f"a {type(t).__name__}"
            where = "" if kind == "tensor" else f" item {i} of its {kind}:"
            return f"forward returned{where} {what}, not a tensor"
    return {
        "kind": kind,
        "tensors": [{"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape)} for t in items],
    }


def _run_reference(
    torch: Any,
    mod: Any,
    model: Any,
    call: dict[str, Any],
    device: str | None,
    module_inputs: bool,
    out: _Probe,
    where: str,
) -> dict[str, Any]:
    """Run the forward once on the inputs, on the session's device: a forward that raises, returns
    something other than tensors, or does not take these inputs is refused before any model is paid."""
    on = _device(torch, device, call)
    try:
        if module_inputs:
            args, kwargs = list(mod.get_inputs()), {}
        else:
            args = [_build(torch, a) for a in call["args"] if a.get("name") is None]
            kwargs = {a["name"]: _build(torch, a) for a in call["args"] if a.get("name") is not None}
        if on == "cuda" and not torch.cuda.is_available():
            on = "cpu"  # the session will say that there is no GPU; the forward is still checked

        def moved(v: Any) -> Any:
            if isinstance(v, torch.Tensor):
                return v.to(on)
            if isinstance(v, tuple) and hasattr(type(v), "_fields"):
                return type(v)(*[moved(x) for x in v])
            if isinstance(v, (list, tuple)):
                return type(v)(moved(x) for x in v)
            return v

        model = model.to(on)
        with torch.no_grad():
            returned = model(*[moved(a) for a in args], **{k: moved(v) for k, v in kwargs.items()})
    except BaseException as exc:
        out.done(error="forward", detail=where + _last_line(exc), device=on)
    described = describe_output(torch, returned)
    if isinstance(described, str):
        out.done(error="output", detail=where + described)
    return described


def main(argv: list[str]) -> NoReturn:
    with open(argv[0]) as f:
        req = json.load(f)
    probe(req, _Probe(argv[1]))


if __name__ == "__main__":
    main(sys.argv[1:])

"""The deployment probe: `python -m cuda_agent_cli.writeback.deploy_probe REQUEST.json`, in the
user's repository, with the kernel folder a plan would write (not yet written).

It imports the user's module as the user's program does, hands the class to that folder's loader
(which builds the extension into the cache the program will load it from), and for each verified
family makes an instance and inputs of that family's shapes. Then it answers the parent, one JSON
line per request on stdout:

- `check`: the call takes the kernel (the loader's own count says so) and matches the original
  forward; under torch.compile the module makes one graph, with no graph break, that calls the
  kernel's op; with autograd, the gradients of the inputs and parameters match the original's.
- `block`: `n` calls in a loop, as the user's Python makes them (host work included, one device
  synchronize at the end), through the patched class or the original forward, or (`compiled_`
  sides) through torch.compile of the instance and of a twin whose class keeps the original
  forward, each compiled once, so neither compiled function sees a class change under it. The
  parent times each block on its own clock: this process runs the candidate's code, so it
  reports no times.

Standard library and torch only (the user's environment); the loader is the plan's own copy.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import json
import os
import runpy
import sys
import traceback
from typing import Any


def _send(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _make_inputs(
    torch: Any, loader: dict[str, Any], family: dict[str, Any], device: str, original: Any
) -> tuple[list[Any], dict[str, Any]]:
    def make(spec: dict[str, Any]) -> Any:
        kind, body = next(iter(spec.items()))
        if kind == "tensor":
            shape = [d if isinstance(d, int) else d["max"] for d in body["shape"]]
            dtype = getattr(torch, body["dtype"])
            if dtype.is_floating_point:
                return torch.randn(shape, dtype=dtype, device=device)
            if dtype == torch.bool:
                return torch.rand(shape, device=device) < 0.5
            lo, hi = body.get("range") or [0, 2]
            return torch.randint(int(lo), int(hi), shape, dtype=dtype, device=device)
        if kind in ("list", "tuple"):
            items = [make(x) for x in body]
            return items if kind == "list" else tuple(items)
        return loader["_make"](spec)

    names = [a["name"] for a in family["args"]]
    in_order = names == list(inspect.signature(original).parameters)[1 : 1 + len(names)]
    if family.get("by_position") or in_order:  # as a user calls it: positionally
        return [make(a["spec"]) for a in family["args"]], {}
    return [], {a["name"]: make(a["spec"]) for a in family["args"]}


def _instance(loader: dict[str, Any], cls: Any, family: dict[str, Any], device: str) -> Any:
    init = family["init"]
    m = cls(
        *[loader["_make"](a["spec"]) for a in init if a["name"] is None],
        **{a["name"]: loader["_make"](a["spec"]) for a in init if a["name"] is not None},
    )
    return m.to(device).eval()


def _close(torch: Any, a: Any, b: Any) -> bool:
    xs = list(a) if isinstance(a, (list, tuple)) else [a]
    ys = list(b) if isinstance(b, (list, tuple)) else [b]
    return len(xs) == len(ys) and all(
        x.shape == y.shape and torch.allclose(x.float(), y.float(), atol=1e-2, rtol=1e-2) for x, y in zip(xs, ys)
    )


def _check(
    torch: Any, loader: dict[str, Any], cls: Any, original: Any, family: dict[str, Any], device: str
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    m = _instance(loader, cls, family, device)
    args, kwargs = _make_inputs(torch, loader, family, device, original)
    with torch.no_grad():
        taken, got = cls.forward._cuda_agent_route(m, tuple(args), kwargs)
        out["taken"] = bool(taken)
        if not taken:
            out["declined"] = got
            got = m(*args, **kwargs)
        out["matches"] = _close(torch, got, original(m, *args, **kwargs))
        try:
            torch._dynamo.reset()
            explained = torch._dynamo.explain(m)(*args, **kwargs)
            ops = cls.forward._cuda_agent_graph_ops()
            targets = [str(n.target) for g in explained.graphs for n in g.graph.nodes if n.op == "call_function"]
            out["compile"] = {
                "graphs": explained.graph_count,
                "graph_breaks": explained.graph_break_count,
                "calls_op": any(t.rsplit(".", 1)[0] in ops or t in ops for t in targets),
            }
        except Exception as exc:  # torch.compile cannot trace it here (no compiler, an unsupported op)
            out["compile"] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        finally:
            torch._dynamo.reset()
    if loader["AUTOGRAD"]:
        out["gradients"] = _gradients(torch, loader, cls, original, family, device)
    return out


def _gradients(
    torch: Any, loader: dict[str, Any], cls: Any, original: Any, family: dict[str, Any], device: str
) -> dict[str, Any]:
    """Gradients through the kernel's op against the original forward's, on the same inputs."""
    m = _instance(loader, cls, family, device).train(False)
    args, kwargs = _make_inputs(torch, loader, family, device, original)
    leaves = [a for a in [*args, *kwargs.values()] if isinstance(a, torch.Tensor) and a.is_floating_point()]
    params = [p for p in m.parameters() if p.requires_grad]
    if not leaves and not params:
        return {"checked": False, "why": "nothing to differentiate"}
    for t in leaves:
        t.requires_grad_(True)

    def grads(forward: Any) -> list[Any]:
        for t in [*leaves, *params]:
            t.grad = None
        out = forward(m, *args, **kwargs)
        outs = [o for o in (out if isinstance(out, (list, tuple)) else [out]) if o.is_floating_point()]
        torch.manual_seed(0)
        total = sum((o * torch.randn_like(o)).sum() for o in outs)
        total.backward()
        return [None if t.grad is None else t.grad.detach().clone() for t in [*leaves, *params]]

    mine = grads(lambda mod, *a, **k: mod(*a, **k))
    theirs = grads(original)
    ok = all(
        (a is None and b is None) or (a is not None and b is not None and _close(torch, a, b))
        for a, b in zip(mine, theirs)
    )
    return {"checked": True, "match": ok, "tensors": len(mine)}


def main(argv: list[str]) -> None:
    with open(argv[0]) as f:
        req = json.load(f)
    for p in reversed(req["paths"]):
        if p in sys.path:
            sys.path.remove(p)
        sys.path.insert(0, p)
    # The module as the user wrote it: an earlier integration of the class stays off.
    os.environ["CUDA_AGENT_DISABLE_KERNELS"] = "1"
    os.environ.pop("CUDA_AGENT_TRACE", None)
    try:
        import torch

        module = importlib.import_module(req["module"])
        cls = getattr(module, req["class"])
        os.environ.pop("CUDA_AGENT_DISABLE_KERNELS")
        loader = runpy.run_path(req["loader"])
        original = cls.forward
        loader["install"](cls)
        if cls.forward is original:
            raise RuntimeError("the loader did not take the class (its source differs from the verified one?)")
        device = loader["VERIFIED"]["device"]
        loader["build"](announce=False)
        threads = None
        if device == "cpu" and req.get("threads"):
            # Both sides with the parent's count (machine.cpu_timing_threads says why).
            torch.set_num_threads(int(req["threads"]))
            threads = torch.get_num_threads()
    except BaseException as exc:
        _send({"ok": False, "error": "".join(traceback.format_exception_only(type(exc), exc)).strip()[-600:]})
        return
    _send({"ok": True, "families": len(loader["FAMILIES"]), "threads": threads})
    families = loader["FAMILIES"]
    made: dict[int, tuple[Any, list[Any], dict[str, Any]]] = {}
    compiled: dict[tuple[int, str], Any] = {}
    for line in sys.stdin:
        request = json.loads(line)
        try:
            family = families[int(request["family"])]
            if request["op"] == "check":
                _send({"ok": True, **_check(torch, loader, cls, original, family, device)})
                continue
            if request["family"] not in made:
                m = _instance(loader, cls, family, device)
                made[request["family"]] = (m, *_make_inputs(torch, loader, family, device, original))
            m, args, kwargs = made[request["family"]]
            side = request["side"]
            call = m
            if side.startswith("compiled_"):
                key = (request["family"], side)
                if key not in compiled:
                    target = m
                    if side == "compiled_original":
                        target = copy.deepcopy(m)
                        target.__class__ = type(f"Original{cls.__name__}", (cls,), {"forward": original})
                    compiled[key] = torch.compile(target)
                call = compiled[key]
            # Every side is the call the program makes, m(x): the original side with the class's
            # own forward put back for the length of the block; the compiled sides each through
            # their own compiled function, whose class never changes under it.
            patched = cls.forward
            if side == "original":
                cls.forward = original
            try:
                with torch.no_grad():
                    for _ in range(int(request["n"])):
                        call(*args, **kwargs)
                    if device == "cuda":
                        torch.cuda.synchronize()
            finally:
                cls.forward = patched
            _send({"ok": True})
        except BaseException as exc:
            _send({"ok": False, "error": f"{type(exc).__name__}: {exc}"[:600]})


if __name__ == "__main__":
    main(sys.argv[1:])

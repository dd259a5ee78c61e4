"""The `--capture` hook: copied as `sitecustomize.py` into the Python that the user's command starts.

It wraps `builtins.__build_class__`. When the target class is created (matched by its name and
the file that defines it, so any import path works), its `__init__` and `forward` are wrapped;
every forward call of an instance of exactly that class is described (dtypes, shapes, devices,
integer ranges; never the data, together with the instance's constructor arguments) and counted
by signature. The counts are written to a file of this process's own as they change, and the
command is stopped once it has made CUDA_AGENT_CAPTURE_CALLS calls (default 1000) or
CUDA_AGENT_CAPTURE_SECONDS seconds have passed since the first (default 60), so a long training
script does not run to the end.

Self-contained: the command's Python may not have cuda-agent, so task/capture.py copies
task/describe.py beside this file; standard library only, plus torch, which the user's code has
imported by the time a class is described.
"""

from __future__ import annotations

import atexit
import builtins
import functools
import json
import os
import time
from typing import Any

if __name__ == "sitecustomize":
    from _cuda_agent_describe import describe_call
else:
    from cuda_agent_cli.task.describe import describe_call

DESCRIBE_MODULE = "_cuda_agent_describe"  # the name task/capture.py gives the copy of describe.py


def _write(out: str, record: dict[str, Any]) -> None:
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(record, f)
    os.replace(tmp, out)


def signature_key(call: dict[str, Any]) -> str:
    """Calls that differ only in the values inside integer tensors are one signature."""

    def strip(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if k != "range"}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v

    return json.dumps(strip(call), sort_keys=True)


def widest(a: Any, b: Any) -> Any:
    """a with every integer tensor's range widened to cover b's too (same signature)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = {k: widest(v, b.get(k)) for k, v in a.items()}
        if "range" in a and isinstance(b.get("range"), list):
            out["range"] = [min(a["range"][0], b["range"][0]), max(a["range"][1], b["range"][1])]
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [widest(x, y) for x, y in zip(a, b)]
    return a


class _Recording:
    """The calls seen in this process, by signature, and when to stop the command."""

    def __init__(self, out: str) -> None:
        self.out = f"{out}.{os.getpid()}"
        self.calls: dict[str, dict[str, Any]] = {}
        self.error: str | None = None
        self.total = 0
        self.first: float | None = None
        self.most = int(os.environ.get("CUDA_AGENT_CAPTURE_CALLS", "1000"))
        self.seconds = float(os.environ.get("CUDA_AGENT_CAPTURE_SECONDS", "60"))
        atexit.register(self.save)

    def add(self, cls: type, call: dict[str, Any] | None, error: str | None) -> None:
        self.total += 1
        now = time.monotonic()
        if self.first is None:
            self.first = now
        new = False
        if call is None:
            self.error = self.error or error
            new = self.total == 1
        else:
            key = signature_key(call)
            entry = self.calls.get(key)
            if entry is None:
                self.calls[key] = {"call": call, "count": 1}
                new = True
            else:
                entry["count"] += 1
                entry["call"] = widest(entry["call"], call)
        enough = self.total >= self.most or now - self.first >= self.seconds
        if new or enough or self.total % 100 == 0:
            self.save(cls.__qualname__)
        if enough and os.environ.get("CUDA_AGENT_CAPTURE_CONTINUE") != "1":
            os._exit(0)

    def save(self, name: str = "") -> None:
        if not self.total:
            return
        record: dict[str, Any] = {"class": name, "calls": list(self.calls.values()), "total": self.total}
        if self.error:
            record["error"] = self.error
        try:
            _write(self.out, record)
        except OSError:
            pass


def _wrap(cls: type, out: str) -> None:
    init, forward = cls.__init__, cls.forward  # type: ignore[misc,attr-defined]
    recording = _Recording(out)

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if type(self) is cls and not hasattr(self, "_cuda_agent_init"):
            described: Any
            try:
                described = describe_call(args, kwargs, "constructor")
            except TypeError as exc:
                described = {"error": str(exc)}
            object.__setattr__(self, "_cuda_agent_init", described)
        init(self, *args, **kwargs)

    @functools.wraps(forward)
    def forward_(self: Any, *args: Any, **kwargs: Any) -> Any:
        if type(self) is cls:
            init_desc = self.__dict__.get("_cuda_agent_init", [])
            try:
                if isinstance(init_desc, dict):
                    raise TypeError(init_desc["error"])
                call = {"source": "capture", "init": init_desc, "args": describe_call(args, kwargs, "forward")}
                recording.add(cls, call, None)
            except TypeError as exc:
                recording.add(cls, None, str(exc))
        return forward(self, *args, **kwargs)

    cls.__init__ = __init__  # type: ignore[misc]
    cls.forward = forward_  # type: ignore[attr-defined]


def install(target_file: str, class_name: str, out: str) -> None:
    """Wrap the class named `class_name` defined in `target_file` as soon as it is created."""
    target = os.path.realpath(target_file)
    original = builtins.__build_class__

    def build_class(func: Any, name: str, *bases: Any, **kwargs: Any) -> Any:
        cls = original(func, name, *bases, **kwargs)
        try:
            if name == class_name and isinstance(cls, type):
                defined_in = getattr(func, "__globals__", {}).get("__file__")
                if defined_in and os.path.realpath(defined_in) == target and hasattr(cls, "forward"):
                    _wrap(cls, out)
        except Exception:
            pass  # never break the user's program over a recording
        return cls

    builtins.__build_class__ = build_class  # type: ignore[assignment]


def _run_the_next_sitecustomize() -> None:
    """This file shadows any sitecustomize.py the user's Python has (a virtualenv's, a
    cluster's): run that one too, so the command starts as it would without cuda-agent."""
    import importlib.machinery
    import importlib.util
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


if __name__ == "sitecustomize":
    try:  # the capture tells "no Python loaded the hook" from "the class was never called"
        open(os.environ["CUDA_AGENT_CAPTURE_OUT"] + ".loaded", "a").close()
    except OSError:
        pass
    install(
        os.environ["CUDA_AGENT_CAPTURE_TARGET"],
        os.environ["CUDA_AGENT_CAPTURE_CLASS"],
        os.environ["CUDA_AGENT_CAPTURE_OUT"],
    )
    _run_the_next_sitecustomize()

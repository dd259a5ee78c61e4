"""The `--capture` hook: copied as `sitecustomize.py` into the Python that the user's command starts.

It wraps `builtins.__build_class__`. When the target class is created (matched by its name and
the file that defines it, so any import path works), its `__init__` and `forward` are wrapped;
the first forward call of an instance of exactly that class writes a JSON description (dtypes,
shapes, devices, integer ranges; never the data) of the constructor and forward arguments, and
the command is then stopped so a long training script does not run to the end.

Self-contained: the command's Python may not have cuda-agent, so task/capture.py copies
task/describe.py beside this file; standard library only, plus torch, which the user's code has
imported by the time a class is described.
"""

from __future__ import annotations

import builtins
import functools
import json
import os
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


def _wrap(cls: type, out: str) -> None:
    init, forward = cls.__init__, cls.forward  # type: ignore[misc,attr-defined]

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
        if type(self) is cls and not os.path.exists(out):
            record: dict[str, Any] = {"class": cls.__qualname__}
            init_desc = self.__dict__.get("_cuda_agent_init", [])
            try:
                if isinstance(init_desc, dict):
                    raise TypeError(init_desc["error"])
                record["call"] = {
                    "source": "capture",
                    "init": init_desc,
                    "args": describe_call(args, kwargs, "forward"),
                }
            except TypeError as exc:
                record = {"error": str(exc)}
            _write(out, record)
            if os.environ.get("CUDA_AGENT_CAPTURE_CONTINUE") != "1":
                os._exit(0)
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

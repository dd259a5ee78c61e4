"""Live Python values -> the JSON form of task/inputs.py's value_to_json (never the data itself).

Used by the probe on get_inputs() results and by the capture hook on the first recorded call.
Standard library and torch only, and torch only once a value is described: the capture hook
copies this file beside itself into the user's own Python, which may not have cuda-agent.
"""

from __future__ import annotations

import dataclasses
import enum
import types
from typing import Any


def describe(value: Any, where: str) -> dict[str, Any]:
    import torch

    if isinstance(value, torch.Tensor):
        t: dict[str, Any] = {"dtype": str(value.dtype).replace("torch.", ""), "shape": list(value.shape)}
        if value.device.type != "cpu":
            t["device"] = value.device.type
        if not value.is_floating_point() and value.dtype != torch.bool and value.numel():
            t["range"] = [int(value.min().item()), int(value.max().item()) + 1]
        return {"tensor": t}
    if isinstance(value, enum.Enum):  # before int: an IntEnum member is an int too
        return _reference(type(value), f"{type(value).__qualname__}.{value.name}", where)
    if isinstance(value, bool) or value is None or isinstance(value, (int, float, str)):
        return {"value": value}
    if isinstance(value, torch.dtype):
        return {"object": {"module": "torch", "qualname": str(value).replace("torch.", ""), "call": False}}
    if isinstance(value, tuple) and hasattr(type(value), "_fields"):  # a namedtuple
        return _built(type(value), {f: getattr(value, f) for f in getattr(type(value), "_fields")}, where)
    if isinstance(value, (list, tuple)):
        kind = "list" if isinstance(value, list) else "tuple"
        return {kind: [describe(v, f"{where}[{i}]") for i, v in enumerate(value)]}
    if type(value) is dict and all(isinstance(k, str) and k.isidentifier() for k in value):
        return _built(dict, value, where)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.init}
        return _built(type(value), fields, where)
    if type(value) is types.SimpleNamespace or (type(value).__module__, type(value).__name__) == (
        "argparse",
        "Namespace",
    ):
        return _built(type(value), dict(vars(value)), where)
    raise TypeError(
        f"{where} is a {type(value).__module__}.{type(value).__qualname__}, "
        "which cannot be described as a shape and dtype (tensors, numbers, strings, lists, dicts, "
        "dataclasses, namedtuples, namespaces, enums and dtypes can)"
    )


def _importable(cls: type, where: str) -> str:
    """The module a class can be imported from again, in another process."""
    module = cls.__module__
    if module == "__main__" or "<locals>" in cls.__qualname__:
        raise TypeError(
            f"{where} is a {cls.__qualname__} defined "
            + ("in the script itself" if module == "__main__" else "inside a function")
            + ", which another process cannot import; define it at the top level of a module"
        )
    return module


def _reference(cls: type, qualname: str, where: str) -> dict[str, Any]:
    return {"object": {"module": _importable(cls, where), "qualname": qualname, "call": False}}


def _built(cls: type, fields: dict[str, Any], where: str) -> dict[str, Any]:
    """An object made again by calling its class with its fields as keyword arguments."""
    args = [dict(name=k, **describe(v, f"{where}.{k}")) for k, v in fields.items()]
    return {"object": {"module": _importable(cls, where), "qualname": cls.__qualname__, "args": args, "call": True}}


def describe_call(args: list[Any] | tuple[Any, ...], kwargs: dict[str, Any], what: str) -> list[dict[str, Any]]:
    out = [dict(name=None, **describe(a, f"{what} argument {i}")) for i, a in enumerate(args)]
    out += [dict(name=k, **describe(v, f"{what} argument {k!r}")) for k, v in kwargs.items()]
    return out

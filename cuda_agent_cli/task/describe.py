"""Live Python values -> the JSON form of task/inputs.py's value_to_json (never the data itself).

Used by the probe on get_inputs() results and by the capture hook on the first recorded call.
Standard library and torch only, and torch only once a value is described: the capture hook
copies this file beside itself into the user's own Python, which may not have cuda-agent.
"""

from __future__ import annotations

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
    if isinstance(value, bool) or value is None or isinstance(value, (int, float, str)):
        return {"value": value}
    if isinstance(value, (list, tuple)):
        kind = "list" if isinstance(value, list) else "tuple"
        return {kind: [describe(v, f"{where}[{i}]") for i, v in enumerate(value)]}
    if isinstance(value, torch.dtype):
        raise TypeError(f"{where} is a torch.dtype ({value}); pass dtypes through get_init_inputs()")
    raise TypeError(
        f"{where} is a {type(value).__module__}.{type(value).__qualname__}, "
        "which cannot be described as a shape and dtype"
    )


def describe_call(args: list[Any] | tuple[Any, ...], kwargs: dict[str, Any], what: str) -> list[dict[str, Any]]:
    out = [dict(name=None, **describe(a, f"{what} argument {i}")) for i, a in enumerate(args)]
    out += [dict(name=k, **describe(v, f"{what} argument {k!r}")) for k, v in kwargs.items()]
    return out

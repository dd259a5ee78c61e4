"""Locked: constructor arguments that are objects of the user's code, on their way between jobs.

Input sets travel as torch.save files read back with weights_only=True, which takes tensors,
numbers, strings, containers and dtypes, but not a config dataclass, a namedtuple, a namespace
or an enum member. Such arguments travel twice:

- as a portable description inside the set (plain containers and values only), from which the
  candidate's process builds stand-ins: objects of new classes with the same name, fields and
  property values (a dataclass, a namedtuple, an Enum, a namespace). The candidate's process never
  imports the reference's module, where these classes are often defined;
- as a pickle beside the set, read only by trusted processes that have the reference loaded
  (baselines, judge), which build the reference from the real objects.

The fingerprints of a set cover the portable description, so every process compares the same.
"""

from __future__ import annotations

import dataclasses
import enum
import pickle
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

KEY = "__cuda_agent_object__"
_PLAIN = (int, float, bool, str, bytes, type(None), torch.dtype, torch.device)


def has_objects(obj: Any) -> bool:
    """Whether `obj` holds anything weights_only loading refuses."""
    if isinstance(obj, (torch.Tensor, *_PLAIN)):
        return False
    if type(obj) in (list, tuple):
        return any(has_objects(o) for o in obj)
    if type(obj) is dict:
        return any(not isinstance(k, (str, int)) or has_objects(v) for k, v in obj.items())
    return True


def _properties(obj: Any) -> dict[str, Any]:
    """Property values of an object (a config's derived sizes), kept on its stand-in."""
    out: dict[str, Any] = {}
    for klass in type(obj).__mro__:
        for name, attr in vars(klass).items():
            if isinstance(attr, property) and name not in out and not name.startswith("_"):
                try:
                    out[name] = portable(getattr(obj, name))
                except Exception:  # a property that cannot be computed or carried: left out
                    continue
    return out


def portable(obj: Any) -> Any:
    """A description of `obj` made of tensors, plain values and containers only."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu")
    if isinstance(obj, _PLAIN):
        return obj
    if type(obj) is list:
        return [portable(o) for o in obj]
    if type(obj) is tuple:
        return tuple(portable(o) for o in obj)
    if isinstance(obj, dict):
        # Any mapping (an OrderedDict, a defaultdict) travels as a plain dict of its items.
        return {k: portable(v) for k, v in obj.items()}
    kind = type(obj)
    head = {KEY: "", "module": kind.__module__, "qualname": kind.__qualname__}
    if isinstance(obj, enum.Enum):
        members = {m.name: portable(m.value) for m in kind}
        return {**head, KEY: "enum", "members": members, "name": obj.name}
    if isinstance(obj, tuple) and hasattr(kind, "_fields"):
        return {**head, KEY: "namedtuple", "fields": list(kind._fields), "values": [portable(v) for v in obj]}
    if dataclasses.is_dataclass(obj):
        fields = {f.name: portable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        return {**head, KEY: "dataclass", "fields": fields, "properties": _properties(obj)}
    if isinstance(obj, SimpleNamespace):
        return {**head, KEY: "namespace", "fields": {k: portable(v) for k, v in vars(obj).items()}}
    if hasattr(obj, "__dict__"):
        fields = {k: portable(v) for k, v in vars(obj).items()}
        return {**head, KEY: "object", "fields": fields, "properties": _properties(obj)}
    raise TypeError(f"a constructor argument of type {kind.__module__}.{kind.__qualname__} cannot be carried")


_classes: dict[tuple[str, str, str], Any] = {}


def _new_class(kind: str, name: str, desc: dict[str, Any]) -> Any:
    # Returned, not assigned: an assignment `X = Enum(name, ...)` is a class definition to the type
    # checker, which wants a literal name there.
    if kind == "enum":
        return enum.Enum(name, {k: standins(v) for k, v in desc["members"].items()})
    if kind == "namedtuple":
        import collections

        return collections.namedtuple(name, desc["fields"])
    if kind == "dataclass":
        return dataclasses.make_dataclass(name, list(desc["fields"]))
    return type(name, (), {"__eq__": lambda a, b: type(a) is type(b) and vars(a) == vars(b)})


def _stand_in_class(kind: str, desc: dict[str, Any]) -> Any:
    key = (kind, desc["module"], desc["qualname"])
    if key in _classes:
        return _classes[key]
    name = desc["qualname"].rsplit(".", 1)[-1]
    made = _new_class(kind, name, desc)
    for prop, value in (desc.get("properties") or {}).items():
        if prop not in (desc.get("fields") or {}):
            setattr(made, prop, standins(value))
    made.__module__, made.__qualname__ = desc["module"], desc["qualname"]
    _classes[key] = made
    return made


def standins(obj: Any) -> Any:
    """The candidate's objects for a portable description (everything else as it is)."""
    if type(obj) is list:
        return [standins(o) for o in obj]
    if type(obj) is tuple:
        return tuple(standins(o) for o in obj)
    if type(obj) is not dict:
        return obj
    kind = obj.get(KEY)
    if not isinstance(kind, str) or not kind:
        return {k: standins(v) for k, v in obj.items()}
    if kind == "namespace":
        return SimpleNamespace(**{k: standins(v) for k, v in obj["fields"].items()})
    made = _stand_in_class(kind, obj)
    if kind == "enum":
        return made[obj["name"]]
    if kind == "namedtuple":
        return made(*[standins(v) for v in obj["values"]])
    if kind == "dataclass":
        return made(**{k: standins(v) for k, v in obj["fields"].items()})
    instance = made.__new__(made)
    vars(instance).update({k: standins(v) for k, v in obj["fields"].items()})
    return instance


def save(init: Any, folder: Path, index: int, what: str = "init") -> tuple[Any, str | None]:
    """(what the set carries, the pickle of the real objects beside it or None): the constructor
    arguments (`what="init"`) or the inputs (`"inputs"`) of set `index`."""
    if not has_objects(init):
        return init, None
    name = f"{what}_{index}.pkl"
    with open(folder / name, "wb") as f:
        pickle.dump(init, f)
    return portable(init), name


def load_real(folder: Path, payload: dict[str, Any], what: str = "init") -> Any:
    """The real constructor arguments (or inputs) of a set, for a trusted process with the
    reference loaded."""
    name = payload.get(f"{what}_pickle")
    if not name:
        return payload[what]
    with open(folder / name, "rb") as f:
        return pickle.load(f)

"""Locked: the leaves of a call's arguments, whatever holds them.

A module's forward may take its tensors one by one, in lists and tuples, in dicts, in
namedtuples, in dataclasses or in namespaces, nested as deep as a data loader makes them. Every
process of an evaluation walks them the same way: the candidate's (with the stand-ins of
tools/init_objects.py for the user's classes), the judge's and the baselines' (with the real
objects). So the walk looks at the shape of a container, never at its class's identity: a
dataclass and its stand-in, a namedtuple and its stand-in, have the same leaves in the same order.

Every leaf that is a tensor is cloned, moved, drawn anew and fingerprinted by its content
(tools/timing.py, tools/evidence.py): a tensor that no one looks at is one a cache can key on.
Standard library and torch only.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
from types import SimpleNamespace
from typing import Any, Callable, Iterator

import torch

_Tensor = torch.Tensor


def _is_record(obj: Any) -> bool:
    """A container whose leaves are named attributes: a dataclass instance, a namespace, or any
    other plain object of the user's with attributes, as tools/init_objects.py `portable`
    describes them (so a real object and its stand-in are walked alike). Classes, callables
    (modules, functions), enum members and torch's own objects are leaves."""
    if isinstance(obj, (type, _Tensor, enum.Enum)) or callable(obj):
        return False
    if dataclasses.is_dataclass(obj) or isinstance(obj, SimpleNamespace):
        return True
    return hasattr(obj, "__dict__") and not type(obj).__module__.startswith("torch")


def _record_fields(obj: Any) -> list[str]:
    if dataclasses.is_dataclass(obj):
        return [f.name for f in dataclasses.fields(obj)]
    return list(vars(obj))


def items(obj: Any) -> list[tuple[str | int, Any]] | None:
    """The children of a container with their keys (position, dict key, field name), in the order
    every process walks them; None for a leaf."""
    if isinstance(obj, _Tensor):
        return None
    if isinstance(obj, (list, tuple)):
        return list(enumerate(obj))
    if isinstance(obj, dict):
        return list(obj.items())
    if _is_record(obj):
        return [(name, getattr(obj, name)) for name in _record_fields(obj)]
    return None


def is_sequence(obj: Any) -> bool:
    """Lists and tuples (namedtuples too): their fingerprints are lists, the others' are maps."""
    return isinstance(obj, (list, tuple)) and not isinstance(obj, _Tensor)


def rebuild(obj: Any, values: list[Any]) -> Any:
    """A container of obj's own kind holding `values` in place of its children (same order)."""
    if isinstance(obj, tuple) and hasattr(type(obj), "_fields"):
        return type(obj)(*values)
    if isinstance(obj, (list, tuple)):
        return type(obj)(values)
    if isinstance(obj, dict):
        made = copy.copy(obj)
        for key, value in zip(list(obj), values):
            made[key] = value
        return made
    # A record: a shallow copy with its fields replaced. Its __init__ and __post_init__ are not
    # run again (they could compute from the old values), and a frozen dataclass is written too.
    made = copy.copy(obj)
    for name, value in zip(_record_fields(obj), values):
        object.__setattr__(made, name, value)
    return made


def map_leaves(obj: Any, fn: Callable[[Any], Any]) -> Any:
    """The same containers, every leaf replaced by fn(leaf)."""
    children = items(obj)
    if children is None:
        return fn(obj)
    return rebuild(obj, [map_leaves(value, fn) for _, value in children])


def map_tensors(obj: Any, fn: Callable[[_Tensor], Any]) -> Any:
    """The same containers, every tensor leaf replaced by fn(tensor), other leaves as they are."""
    return map_leaves(obj, lambda leaf: fn(leaf) if isinstance(leaf, _Tensor) else leaf)


def walk(obj: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(path, leaf) for every leaf, depth first; paths read like `[0]['pair'].x`."""
    children = items(obj)
    if children is None:
        yield path, obj
        return
    for key, value in children:
        if isinstance(key, int) and is_sequence(obj):
            step = f"[{key}]"
        elif isinstance(obj, dict):
            step = f"[{key!r}]"
        else:
            step = f".{key}"
        yield from walk(value, path + step)


def tensors(obj: Any) -> list[_Tensor]:
    """Every tensor leaf, depth first: the order a draw plan's entries follow."""
    return [leaf for _, leaf in walk(obj) if isinstance(leaf, _Tensor)]


def tensor_paths(obj: Any) -> list[str]:
    """The path of every tensor leaf, in the order of `tensors`."""
    return [path for path, leaf in walk(obj) if isinstance(leaf, _Tensor)]


def nbytes(obj: Any) -> int:
    """Bytes of every tensor leaf's elements."""
    return sum(t.numel() * t.element_size() for t in tensors(obj))

"""A tool call's arguments against its tool's JSON schema: the one validator.

Tool schemas use a small subset of JSON schema (type, possibly a list of types; enum; minimum and
maximum; minItems and items; properties, required and additionalProperties), and this checks
exactly that subset. It finds the problems; each caller words them for its reader: the loop and
the text protocol as one sentence for the model (`textproto.validate_arguments`), the toolbox as
its list (`actions.toolbox.validate`).

Two leniencies: an integer-valued float (3.0) is an integer, and an optional argument given as
null counts as left out (models send both).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

ProblemKind = Literal["type", "enum", "minimum", "maximum", "min_items", "required", "unknown"]

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


@dataclass(frozen=True)
class Problem:
    """One way the arguments miss the schema, at `path` (() is the arguments themselves;
    ("edits", 0, "new_string") a field of an item of an array argument)."""

    kind: ProblemKind
    path: tuple[str | int, ...]
    value: Any = None  # what was given (type, enum, minimum, maximum, min_items)
    # The type(s) wanted, the enum's values, the bound, the least number of items, or for
    # "unknown" the names the object allows.
    expected: Any = None

    @property
    def name(self) -> str:
        """The argument's own name (the last step of the path)."""
        return str(self.path[-1]) if self.path else ""

    def dotted(self) -> str:
        """The path as `edits[0].new_string`."""
        out = ""
        for step in self.path:
            out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else step)
        return out


def type_ok(value: Any, expected: str | list[str]) -> bool:
    """Whether `value` is of the JSON type (or one of the types) `expected`; a type not modelled
    here is accepted rather than a valid call rejected."""
    for kind in expected if isinstance(expected, list) else [expected]:
        py = _TYPES.get(kind)
        if py is None:
            return True
        if isinstance(value, bool) and kind in ("integer", "number"):
            continue
        if kind == "integer" and isinstance(value, float) and value.is_integer():
            return True
        if isinstance(value, py):
            return True
    return False


def argument_problems(args: Any, schema: dict[str, Any], path: tuple[str | int, ...] = ()) -> list[Problem]:
    """Every problem of `args` against `schema`, in order: the value's own (type first: a value
    of the wrong type is not looked into), then, for an object, its missing required fields, its
    unknown fields and each field's own problems."""
    kind = schema.get("type")
    if kind and not type_ok(args, kind):
        return [Problem("type", path, args, kind)]
    found: list[Problem] = []
    if "enum" in schema and args not in schema["enum"]:
        found.append(Problem("enum", path, args, schema["enum"]))
    if isinstance(args, (int, float)) and not isinstance(args, bool):
        if "minimum" in schema and args < schema["minimum"]:
            found.append(Problem("minimum", path, args, schema["minimum"]))
        if "maximum" in schema and args > schema["maximum"]:
            found.append(Problem("maximum", path, args, schema["maximum"]))
    if isinstance(args, list):
        if len(args) < schema.get("minItems", 0):
            found.append(Problem("min_items", path, args, schema["minItems"]))
        for i, item in enumerate(args):
            found += argument_problems(item, schema.get("items", {}), (*path, i))
    if isinstance(args, dict):
        props: dict[str, Any] = schema.get("properties") or {}
        required = schema.get("required") or []
        found += [Problem("required", (*path, name)) for name in required if name not in args]
        if schema.get("additionalProperties") is False:
            found += [Problem("unknown", (*path, name), expected=tuple(props)) for name in args if name not in props]
        for name, value in args.items():
            spec = props.get(name)
            if isinstance(spec, dict) and not (value is None and name not in required):
                found += argument_problems(value, spec, (*path, name))
    return found


def as_declared(args: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """Valid arguments as the tool reads them, with the two leniencies applied: an optional
    argument given as null is left out, and an integer-valued float given for an integer is
    that integer."""
    props: dict[str, Any] = schema.get("properties") or {}
    out: dict[str, Any] = {}
    for name, value in args.items():
        if value is None:
            continue
        spec = props.get(name)
        kind = spec.get("type") if isinstance(spec, dict) else None
        kinds = kind if isinstance(kind, list) else [kind]
        if isinstance(value, float) and value.is_integer() and "integer" in kinds and "number" not in kinds:
            value = int(value)
        out[name] = value
    return out

"""The small input language of `--inputs`, and the one description of a call every source shares.

`--inputs "x=float16[8,4096] cuda, y=int64[8] 0..1000, eps=1e-5; init: 4096, eps=1e-6"`

- entries are separated by commas (commas inside brackets or parentheses do not count);
- `name=` is optional: named entries become keyword arguments, the others positional ones;
- a tensor is `DTYPE[D0,D1,...]`, optionally followed by a device (`cpu`, `cuda`, `cuda:1`) and a
  value range `LO..HI` (integers: `randint(LO, HI)`; floats: uniform in [LO, HI));
- an object of the user's code is a call, `Config(dim=64, act="gelu")`, or a dotted name,
  `torch.float16`, `Mode.FAST`: the names are looked up in the target's own module, and the
  call's arguments are written in this same form;
- anything else is a Python literal (number, bool, None, string, tuple of numbers);
- an optional `; init: ...` part gives the constructor arguments in the same form;
- a dimension may be a name given a range in the same spec, `x=float32[B,512], B=1..64`: the
  kernel is verified and timed at the range's ends and a middle value, and runs for every size
  in it (a name used by several tensors means the same size in each);
- several specs, `|` between them (or `--inputs` given again), are several shapes the program
  calls the class with: each is verified and timed.

A captured call (`--capture`) and a KernelBench `get_inputs()` are described with the same
`CallSpec`, so the generated reference, the manifest and the write-back guard share one shape.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Union, cast

from cuda_agent_cli.errors import InputSpecError

DTYPES: dict[str, str] = {
    "float16": "float16",
    "half": "float16",
    "fp16": "float16",
    "f16": "float16",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float32": "float32",
    "float": "float32",
    "fp32": "float32",
    "f32": "float32",
    "float64": "float64",
    "double": "float64",
    "fp64": "float64",
    "f64": "float64",
    "int8": "int8",
    "uint8": "uint8",
    "int16": "int16",
    "int32": "int32",
    "int": "int32",
    "int64": "int64",
    "long": "int64",
    "bool": "bool",
}
FLOAT_DTYPES = {"float16", "bfloat16", "float32", "float64"}
SPEC_HINT = 'write it like --inputs "x=float16[8,4096] cuda, mask=bool[8], eps=1e-5; init: 4096"'

_TENSOR_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*\[([^\]]*)\]\s*(.*)$", re.S)
_NAME_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*=(?!=)\s*(.*)$", re.S)
_DEVICE_RE = re.compile(r"^(cpu|cuda(:\d+)?)$")
_CALL_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\s*\((.*)\)$", re.S)
_DOTTED_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+$")
_RANGE_RE = re.compile(r"^(-?[0-9.eE+-]+)\.\.(-?[0-9.eE+-]+)$")


@dataclass(frozen=True)
class TensorSpec:
    """A tensor to make at random: dtype name, shape, device (None: the session's) and range."""

    dtype: str
    shape: tuple[int, ...]
    device: str | None = None
    low: float | None = None
    high: float | None = None
    dims: tuple[str | None, ...] = ()  # names of dimensions with a range (CallSpec.ranges), else None

    def describe(self) -> str:
        text = f"{self.dtype}[{','.join(str(d) for d in self.shape)}]"
        if self.device:
            text += f" {self.device}"
        if self.low is not None and self.high is not None:
            text += f" {_num(self.low)}..{_num(self.high)}"
        return text


@dataclass(frozen=True)
class ListSpec:
    """A list or tuple argument whose items are specs themselves (captured calls only)."""

    items: tuple["Value", ...]
    kind: str = "list"  # "list" or "tuple"


@dataclass(frozen=True)
class ObjectSpec:
    """An object of the user's code, made again by importing `qualname` from `module` and
    calling it with `args` (a dataclass, a namedtuple, a namespace, a dict), or just reading it
    (`call` False: a dtype, an enum member). `module` None: the target's own module (--inputs)."""

    module: str | None
    qualname: str
    args: tuple["Arg", ...] = ()
    call: bool = True


Value = Union[TensorSpec, ListSpec, ObjectSpec, int, float, bool, str, None, tuple[Any, ...]]


@dataclass(frozen=True)
class Arg:
    name: str | None  # None: positional
    value: Value


@dataclass(frozen=True)
class CallSpec:
    """Forward arguments and constructor arguments, each positional then keyword."""

    args: tuple[Arg, ...] = ()
    init: tuple[Arg, ...] = ()
    source: str = "inputs"  # "inputs" | "capture" | "get_inputs"
    ranges: tuple[tuple[str, int, int], ...] = ()  # named dimensions: (name, lowest, highest)

    def describe(self) -> str:
        text = ", ".join(_describe_arg(a) for a in self.args)
        if self.init:
            text += "; init: " + ", ".join(_describe_arg(a) for a in self.init)
        return text

    def family(self) -> str:
        """The spec this call stands for: its shapes with the named dimensions, e.g.
        `float32[B,512] B=1..64`; the plain description where no dimension is named."""
        if not self.ranges:
            return self.describe()
        return f"{_family_text(self)} " + " ".join(f"{n}={lo}..{hi}" for n, lo, hi in self.ranges)

    def signature_lines(self, forward_params: tuple[str, ...] = ()) -> list[str]:
        """`forward(x: float32[8,384], eps=1e-05)` and `__init__(384)`: what a call is made of,
        positional arguments labelled with the forward signature's names where it gives them."""

        def part(i: int, a: Arg, names: tuple[str, ...]) -> str:
            if a.name:
                return f"{a.name}={_describe_value(a.value)}"
            label = names[i] if i < len(names) else None
            return f"{label}: {_describe_value(a.value)}" if label else _describe_value(a.value)

        fwd = ", ".join(part(i, a, forward_params) for i, a in enumerate(self.args))
        init = ", ".join(part(i, a, ()) for i, a in enumerate(self.init))
        return [f"forward({fwd})", f"__init__({init})"]

    def tensors(self) -> list[tuple[str, TensorSpec]]:
        """Every forward tensor with a label (its name, or its position)."""
        out: list[tuple[str, TensorSpec]] = []
        for i, a in enumerate(self.args):
            _collect(a.name or f"arg{i}", a.value, out)
        return out

    def device(self) -> str | None:
        """The device the inputs ask for, when any of them names one."""
        for _, t in self.tensors():
            if t.device:
                return t.device.split(":")[0]
        return None


def _collect(label: str, value: Value, out: list[tuple[str, TensorSpec]]) -> None:
    if isinstance(value, TensorSpec):
        out.append((label, value))
    elif isinstance(value, ListSpec):
        for j, item in enumerate(value.items):
            _collect(f"{label}[{j}]", item, out)
    elif isinstance(value, ObjectSpec):
        for j, a in enumerate(value.args):
            _collect(f"{label}.{a.name or j}", a.value, out)


def _family_text(call: CallSpec) -> str:
    def value(v: Value) -> str:
        if isinstance(v, TensorSpec) and v.dims:
            dims = [name if name else str(d) for d, name in zip(v.shape, v.dims)]
            return _describe_value(TensorSpec(v.dtype, (), v.device, v.low, v.high)).replace(
                "[]", f"[{','.join(dims)}]"
            )
        if isinstance(v, ListSpec):
            inner = ", ".join(value(x) for x in v.items)
            return f"[{inner}]" if v.kind == "list" else f"({inner})"
        return _describe_value(v)

    text = ", ".join(f"{a.name}={value(a.value)}" if a.name else value(a.value) for a in call.args)
    if call.init:
        text += "; init: " + ", ".join(_describe_arg(a) for a in call.init)
    return text


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _describe_value(value: Value) -> str:
    if isinstance(value, TensorSpec):
        return value.describe()
    if isinstance(value, ListSpec):
        inner = ", ".join(_describe_value(v) for v in value.items)
        return f"[{inner}]" if value.kind == "list" else f"({inner}{',' if len(value.items) == 1 else ''})"
    if isinstance(value, ObjectSpec):
        if not value.call:
            return value.qualname if value.module in (None, "builtins") else f"{value.module}.{value.qualname}"
        return f"{value.qualname}({', '.join(_describe_arg(a) for a in value.args)})"
    return repr(value)


def _describe_arg(arg: Arg) -> str:
    text = _describe_value(arg.value)
    return f"{arg.name}={text}" if arg.name else text


# ---------------------------------------------------------------- parsing


def split_top_level(text: str, sep: str) -> list[str]:
    """Split on `sep` where it is not inside brackets, parentheses or quotes."""
    parts: list[str] = []
    depth = 0
    quote: str | None = None
    start = 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def parse_value(text: str) -> Value:
    """One value: a tensor spec or a Python literal."""
    text = text.strip()
    if not text:
        raise InputSpecError("--inputs has an empty entry", SPEC_HINT)
    r = re.fullmatch(r"(\d+)\s*\.\.\s*(\d+)", text)
    if r:
        lo, hi = int(r.group(1)), int(r.group(2))
        if not 0 < lo <= hi:
            raise InputSpecError(f"--inputs: range `{text}` must have 0 < LO <= HI", "for example B=1..64")
        return cast(Value, _DimRange(lo, hi))
    m = _TENSOR_RE.match(text)
    if m and m.group(1) not in ("True", "False", "None"):
        return _parse_tensor(m.group(1), m.group(2), m.group(3), text)
    call = _CALL_RE.match(text)
    if call and _balanced(call.group(2)):  # one call, closed at the end (not `f(a)(b)`)
        return ObjectSpec(None, call.group(1), parse_args(call.group(2)) if call.group(2).strip() else ())
    if _DOTTED_RE.match(text):
        return ObjectSpec(None, text, call=False)
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise InputSpecError(f"--inputs: cannot read `{text}` as a tensor or a literal", SPEC_HINT) from None
    if isinstance(value, (list, dict, set)):
        value = tuple(value) if isinstance(value, list) else value
    if not isinstance(value, (int, float, bool, str, type(None), tuple)):
        raise InputSpecError(f"--inputs: `{text}` is not a number, bool, string, None or tuple", SPEC_HINT)
    return value


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += (ch in "([{") - (ch in ")]}")
        if depth < 0:
            return False
    return depth == 0


def _parse_tensor(dtype_word: str, dims: str, rest: str, text: str) -> TensorSpec:
    dtype = DTYPES.get(dtype_word.lower())
    if dtype is None:
        raise InputSpecError(
            f"--inputs: unknown dtype `{dtype_word}` in `{text}`",
            f"use one of {', '.join(sorted(set(DTYPES.values())))}",
        )
    shape: list[int] = []
    names: list[str | None] = []
    for d in (p.strip() for p in dims.split(",")):
        if not d:
            continue
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", d):
            shape.append(0)  # set from the name's range when the spec is expanded
            names.append(d)
            continue
        if not re.fullmatch(r"\d+", d):
            raise InputSpecError(
                f"--inputs: dimension `{d}` in `{text}` is neither a non-negative integer nor a name",
                "write sizes as numbers, or name a dimension and give its range: x=float32[B,512], B=1..64",
            )
        shape.append(int(d))
        names.append(None)
    device = None
    low = high = None
    for token in rest.split():
        if _DEVICE_RE.match(token):
            device = token
            continue
        r = _RANGE_RE.match(token)
        if r:
            try:
                low, high = float(r.group(1)), float(r.group(2))
            except ValueError:
                r = None
        if not r:
            raise InputSpecError(
                f"--inputs: `{token}` in `{text}` is neither a device (cpu, cuda) nor a range LO..HI",
                SPEC_HINT,
            )
        if low is not None and high is not None and not low < high:
            raise InputSpecError(f"--inputs: range `{token}` in `{text}` must have LO < HI", SPEC_HINT)
    if dtype not in FLOAT_DTYPES and dtype != "bool" and low is not None and high is not None:
        if not (float(low).is_integer() and float(high).is_integer()):
            raise InputSpecError(f"--inputs: integer tensor `{text}` needs an integer range", SPEC_HINT)
    return TensorSpec(dtype, tuple(shape), device, low, high, tuple(names) if any(names) else ())


def parse_args(text: str) -> tuple[Arg, ...]:
    args: list[Arg] = []
    seen_named = False
    for entry in split_top_level(text, ","):
        entry = entry.strip()
        if not entry:
            if text.strip():
                raise InputSpecError("--inputs has an empty entry (two commas in a row?)", SPEC_HINT)
            continue
        m = _NAME_RE.match(entry)
        if m:
            name, value = m.group(1), parse_value(m.group(2))
            if any(a.name == name for a in args):
                raise InputSpecError(f"--inputs names `{name}` twice", SPEC_HINT)
            args.append(Arg(name, value))
            seen_named = True
        else:
            if seen_named:
                raise InputSpecError(
                    f"--inputs: positional entry `{entry}` comes after a named one",
                    "put unnamed entries first, as in a Python call",
                )
            args.append(Arg(None, parse_value(entry)))
    return tuple(args)


_DIM_RANGE_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(\d+)\s*\.\.\s*(\d+)\s*$")


def parse_inputs_cases(text: str) -> list[CallSpec]:
    """Every call the `--inputs` text describes: each `|`-separated spec, a spec with named
    dimensions expanded to its range's ends and a middle size (raises InputSpecError, exit 2)."""
    if not text or not text.strip():
        raise InputSpecError("--inputs is empty", SPEC_HINT)
    cases: list[CallSpec] = []
    for part in split_top_level(text, "|"):
        if not part.strip():
            raise InputSpecError("--inputs has an empty spec between `|`", SPEC_HINT)
        for call in expand(parse_inputs_spec(part)):
            if call not in cases:
                cases.append(call)
    return cases


def _named_dims(value: Value) -> set[str]:
    if isinstance(value, TensorSpec):
        return {n for n in value.dims if n}
    if isinstance(value, ListSpec):
        return set().union(*(_named_dims(v) for v in value.items)) if value.items else set()
    return set()


def _middle(lo: int, hi: int) -> int | None:
    """A size between lo and hi: the power of two nearest their geometric mean."""
    if hi - lo < 2:
        return None
    mean = math.sqrt(max(lo, 1) * hi)
    best = min((2**k for k in range(0, 40) if lo < 2**k < hi), key=lambda p: abs(math.log(p / mean)), default=None)
    return best if best is not None else (lo + hi) // 2


def expand(call: CallSpec) -> list[CallSpec]:
    """Concrete calls for a spec with named dimensions: every name at a middle size, its range's
    lowest and its highest, together; the spec itself where it names none."""
    if not call.ranges:
        return [call]
    points = [[_middle(lo, hi) or lo, lo, hi] for _, lo, hi in call.ranges]
    out: list[CallSpec] = []
    for i in range(3):  # the middle first: the size the session optimizes for
        sizes = {name: p[i] for (name, _, _), p in zip(call.ranges, points)}
        concrete = replace(call, args=tuple(Arg(a.name, _sized(a.value, sizes)) for a in call.args))
        if concrete not in out:
            out.append(concrete)
    return out


def _sized(value: Value, sizes: dict[str, int]) -> Value:
    if isinstance(value, TensorSpec) and value.dims:
        shape = tuple(sizes[n] if n else d for d, n in zip(value.shape, value.dims))
        return replace(value, shape=shape)
    if isinstance(value, ListSpec):
        return ListSpec(tuple(_sized(v, sizes) for v in value.items), value.kind)
    return value


def parse_inputs_spec(text: str) -> CallSpec:
    """Parse one `--inputs` spec into a CallSpec (raises InputSpecError, exit 2); named dimensions
    keep a placeholder size until `expand`."""
    if not text or not text.strip():
        raise InputSpecError("--inputs is empty", SPEC_HINT)
    forward: tuple[Arg, ...] | None = None
    init: tuple[Arg, ...] = ()
    for part in split_top_level(text, ";"):
        stripped = part.strip()
        if not stripped:
            continue
        if stripped.startswith("init:"):
            init = parse_args(stripped[len("init:") :])
        elif forward is None:
            forward = parse_args(stripped[len("forward:") :] if stripped.startswith("forward:") else stripped)
        else:
            raise InputSpecError(
                "--inputs has more than one part for forward arguments",
                "separate forward arguments from constructor arguments with `; init: ...`",
            )
    if not forward:
        raise InputSpecError("--inputs gives no forward arguments", SPEC_HINT)
    return _with_ranges(forward, init)


def _with_ranges(forward: tuple[Arg, ...], init: tuple[Arg, ...]) -> CallSpec:
    """Named `NAME=LO..HI` entries give the ranges of the dimensions the tensors name."""
    used: set[str] = set()
    for a in forward:
        used |= _named_dims(a.value)
    ranges: list[tuple[str, int, int]] = []
    args: list[Arg] = []
    for a in forward:
        if a.name and isinstance(a.value, _DimRange):
            if a.name not in used:
                raise InputSpecError(
                    f"--inputs: `{a.name}={a.value.lo}..{a.value.hi}` names no dimension of a tensor",
                    f"use the name in a shape, as in x=float32[{a.name},512]",
                )
            ranges.append((a.name, a.value.lo, a.value.hi))
        else:
            args.append(a)
    missing = sorted(used - {n for n, _, _ in ranges})
    if missing:
        raise InputSpecError(
            f"--inputs: dimension `{missing[0]}` has no range",
            f"give it one in the same spec, as in {missing[0]}=1..64",
        )
    return CallSpec(tuple(args), init, "inputs", tuple(ranges))


@dataclass(frozen=True)
class _DimRange:
    lo: int
    hi: int


# ---------------------------------------------------------------- JSON form (capture, manifest)


def value_to_json(value: Value) -> Any:
    if isinstance(value, TensorSpec):
        d: dict[str, Any] = {"tensor": {"dtype": value.dtype, "shape": list(value.shape)}}
        if value.dims:
            d["tensor"]["dims"] = list(value.dims)
        if value.device:
            d["tensor"]["device"] = value.device
        if value.low is not None:
            d["tensor"]["range"] = [value.low, value.high]
        return d
    if isinstance(value, ListSpec):
        return {value.kind: [value_to_json(v) for v in value.items]}
    if isinstance(value, tuple):
        return {"tuple": [value_to_json(v) for v in value]}
    if isinstance(value, ObjectSpec):
        body: dict[str, Any] = {"module": value.module, "qualname": value.qualname, "call": value.call}
        if value.call:
            body["args"] = [{"name": a.name, **value_to_json(a.value)} for a in value.args]
        return {"object": body}
    return {"value": value}


def value_from_json(obj: Any) -> Value:
    if not isinstance(obj, dict) or len(obj) != 1:
        raise InputSpecError(f"malformed input description {obj!r}", "record the call again with --capture")
    ((kind, body),) = obj.items()
    if kind == "tensor":
        rng = body.get("range") or [None, None]
        if body.get("dtype") not in DTYPES:
            raise InputSpecError(
                f"tensors of dtype {body.get('dtype')} are not supported",
                f"use one of {', '.join(sorted(set(DTYPES.values())))}",
            )
        return TensorSpec(
            DTYPES[body["dtype"]],
            tuple(int(d) for d in body["shape"]),
            body.get("device"),
            rng[0],
            rng[1],
            tuple(body.get("dims") or ()),
        )
    if kind in ("list", "tuple"):
        items = tuple(value_from_json(v) for v in body)
        if kind == "tuple" and not any(isinstance(v, (TensorSpec, ListSpec)) for v in items):
            return items
        return ListSpec(items, kind)
    if kind == "value":
        return cast(Value, body)
    if kind == "object" and isinstance(body, dict) and isinstance(body.get("qualname"), str):
        args = tuple(
            Arg(x.get("name"), value_from_json({k: v for k, v in x.items() if k != "name"}))
            for x in body.get("args") or []
        )
        return ObjectSpec(body.get("module"), body["qualname"], args, bool(body.get("call", True)))
    raise InputSpecError(f"unknown input kind {kind!r}", "record the call again with --capture")


def call_to_json(spec: CallSpec) -> dict[str, Any]:
    def args(xs: tuple[Arg, ...]) -> list[dict[str, Any]]:
        return [{"name": a.name, **value_to_json(a.value)} for a in xs]

    out: dict[str, Any] = {"source": spec.source, "args": args(spec.args), "init": args(spec.init)}
    if spec.ranges:
        out["ranges"] = [list(r) for r in spec.ranges]
    return out


def family_value_json(value: Value, ranges: tuple[tuple[str, int, int], ...]) -> Any:
    """value_to_json with each named dimension as its range, {"name", "min", "max"}: the form
    the integrated loader matches calls against."""
    bounds = {n: (lo, hi) for n, lo, hi in ranges}
    if isinstance(value, TensorSpec) and value.dims:
        d = value_to_json(value)
        d["tensor"]["shape"] = [
            {"name": n, "min": bounds[n][0], "max": bounds[n][1]} if n else s for s, n in zip(value.shape, value.dims)
        ]
        d["tensor"].pop("dims", None)
        return d
    if isinstance(value, ListSpec):
        return {value.kind: [family_value_json(v, ranges) for v in value.items]}
    return value_to_json(value)


def call_from_json(obj: dict[str, Any]) -> CallSpec:
    def args(xs: list[dict[str, Any]]) -> tuple[Arg, ...]:
        out = []
        for x in xs:
            x = dict(x)
            name = x.pop("name", None)
            out.append(Arg(name, value_from_json(x)))
        return tuple(out)

    ranges = tuple((str(n), int(lo), int(hi)) for n, lo, hi in obj.get("ranges") or [])
    return CallSpec(args(obj.get("args", [])), args(obj.get("init", [])), obj.get("source", "inputs"), ranges)


# ---------------------------------------------------------------- Python source (generated model.py)


def value_to_python(value: Value, name_of: Callable[[ObjectSpec], str] | None = None) -> str:
    """A Python expression that makes `value` (tensors on the CPU; the harness moves them).
    `name_of` gives the expression that names an object's class (or the object itself); by
    default `_cuda_agent_object(module, qualname)`, which the generated model.py defines."""
    if isinstance(value, TensorSpec):
        shape = repr(tuple(value.shape))
        dt = f"torch.{value.dtype}"
        if value.dtype == "bool":
            return f"torch.rand({shape}) < 0.5"
        if value.dtype in FLOAT_DTYPES:
            if value.low is not None:
                return f"torch.empty({shape}, dtype={dt}).uniform_({value.low!r}, {value.high!r})"
            return f"torch.randn({shape}, dtype={dt})"
        low = int(value.low) if value.low is not None else 0
        high = int(value.high) if value.high is not None else (2 if value.dtype == "uint8" else 16)
        return f"torch.randint({low}, {high}, {shape}, dtype={dt})"
    if isinstance(value, ListSpec):
        inner = ", ".join(value_to_python(v, name_of) for v in value.items)
        return f"[{inner}]" if value.kind == "list" else f"({inner}{',' if len(value.items) == 1 else ''})"
    if isinstance(value, ObjectSpec):
        callee = name_of(value) if name_of else f"_cuda_agent_object({value.module!r}, {value.qualname!r})"
        if not value.call:
            return callee
        parts = [(f"{a.name}=" if a.name else "") + value_to_python(a.value, name_of) for a in value.args]
        return f"{callee}({', '.join(parts)})"
    return repr(value)


def objects_in(values: Iterable[Value]) -> list[ObjectSpec]:
    """Every object among `values`, nested ones included."""
    found: list[ObjectSpec] = []
    for v in values:
        if isinstance(v, ObjectSpec):
            found.append(v)
            found += objects_in(a.value for a in v.args)
        elif isinstance(v, ListSpec):
            found += objects_in(v.items)
    return found


def with_module(value: Value, module: str) -> Value:
    """`value` with the objects that name no module (written in --inputs) bound to `module`."""
    if isinstance(value, ObjectSpec):
        args = tuple(Arg(a.name, with_module(a.value, module)) for a in value.args)
        return ObjectSpec(value.module or module, value.qualname, args, value.call)
    if isinstance(value, ListSpec):
        return ListSpec(tuple(with_module(v, module) for v in value.items), value.kind)
    return value

"""What the static checks share: the Finding record and the name tables both languages use.

The Python checker (static_python.py) and the C++ checker (static_cpp.py) report the same kind
of finding and judge tensor methods by the same lists, so those live here, beside the names of
the interpreter internals that reach frames, code objects and module globals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Finding:
    """One static finding: `name` is the finding kind, `reason` one line a model can act on."""

    name: str
    severity: Severity
    reason: str
    location: str

    def to_detail(self) -> str:
        return f"{self.severity} {self.name} at {self.location}: {self.reason}"

    @property
    def line(self) -> int:
        tail = self.location.rsplit(":", 1)[-1]
        return int(tail) if tail.isdigit() else 0


# Attributes of frames, generators, coroutines, tracebacks and functions that lead to the
# caller's locals, a module's globals or a code object: from any of them the timing loop and
# the harness modules are one step away.
FRAME_ATTRS = frozenset({
    "f_back", "f_builtins", "f_code", "f_globals", "f_lasti", "f_lineno", "f_locals", "f_trace",
    "f_trace_lines", "f_trace_opcodes", "f_generator",
    "gi_frame", "gi_code", "gi_running", "gi_yieldfrom", "gi_suspended",
    "cr_frame", "cr_code", "cr_await", "cr_origin", "cr_running", "cr_suspended",
    "ag_frame", "ag_code", "ag_await", "ag_running",
    "tb_frame", "tb_next", "tb_lasti", "tb_lineno",
})
# Dunder attributes that reach interpreter internals (globals, code, closures, class graph,
# defaults a function runs with, the original behind a wrapper, attribute machinery).
DUNDER_ESCAPES = frozenset({
    "__globals__", "__code__", "__builtins__", "__subclasses__", "__bases__", "__base__",
    "__mro__", "__dict__", "__closure__", "__func__", "__self__", "__loader__", "__spec__",
    "__import__", "__getattribute__", "__setattr__", "__delattr__", "__class__", "__reduce__",
    "__reduce_ex__", "__torch_function__", "__torch_dispatch__", "__traceback__", "__wrapped__",
    "__defaults__", "__kwdefaults__", "__get__", "__set__", "__objclass__", "__context__",
    "__cause__", "cell_contents", "mro", "__init_subclass__", "__class_getitem__",
    "__set_name__", "__getstate__", "__setstate__", "__annotations__", "__subclasshook__",
})


def is_introspection_attr(name: str) -> bool:
    """Whether reading or writing attribute `name` reaches interpreter internals."""
    return name in FRAME_ATTRS or name in DUNDER_ESCAPES or name.startswith("co_")


# Tensor methods that are allocation, views, casts or metadata: allowed under strict. `numpy`
# is not among them: a round trip through numpy reaches its BLAS, out of the op guard's sight.
TENSOR_ALLOWED_METHODS = frozenset({
    "size", "dim", "ndim", "numel", "stride", "storage_offset", "is_contiguous", "contiguous",
    "view", "view_as", "reshape", "reshape_as", "flatten", "unflatten", "squeeze", "unsqueeze",
    "permute", "transpose", "t", "T", "mT", "expand", "expand_as", "narrow", "select", "unbind",
    "split", "chunk", "movedim", "data_ptr", "element_size", "item", "tolist", "to", "cuda", "cpu",
    "float", "half", "double", "bfloat16", "int", "long", "bool", "type", "type_as", "detach",
    "clone", "copy_", "new_empty", "new_zeros", "new_ones", "new_full", "new_tensor", "zero_",
    "fill_", "requires_grad_", "get_device", "is_cuda", "dtype", "device", "shape",
    "untyped_storage", "nelement", "dim_order", "as_strided", "register_buffer",
    "register_parameter", "parameters", "named_parameters", "buffers", "state_dict", "eval",
    "train", "apply", "modules", "children", "load_state_dict", "forward",
})
# Tensor methods that compute. A call `x.<name>(...)` on a value that is not a module we know
# is reported under strict: the receiver's type is unknown statically, so only names that are
# torch compute ops (and hardly anything else in a model file) are on this list.
TENSOR_COMPUTE_METHODS = frozenset({
    "abs", "abs_", "add", "add_", "addmm", "addbmm", "addcmul", "addcdiv", "addmv", "all", "amax",
    "amin", "any", "argmax", "argmin", "argsort", "baddbmm", "bmm", "ceil", "clamp", "clamp_",
    "clamp_max", "clamp_min", "clip", "cos", "cosh", "cumprod", "cumsum", "diff", "div", "div_",
    "dot", "einsum", "eq", "erf", "exp", "exp_", "expm1", "floor", "fmod", "gather", "ge", "gelu",
    "gt", "hardtanh", "index_add", "index_select", "le", "lerp", "log", "log1p", "log2",
    "log_softmax", "logsumexp", "lt", "masked_fill", "masked_fill_", "matmul", "max", "maximum",
    "mean", "median", "min", "minimum", "mm", "mul", "mul_", "mv", "ne", "neg", "neg_", "norm",
    "outer", "pow", "pow_", "prod", "reciprocal", "relu", "relu_", "remainder", "round", "rsqrt",
    "scatter", "scatter_add", "sigmoid", "sigmoid_", "sign", "sin", "sinh", "softmax", "sort",
    "sqrt", "sqrt_", "square", "std", "sub", "sub_", "sum", "tan", "tanh", "tanh_", "topk",
    "tril", "triu", "var", "where", "logical_and", "logical_or", "logical_not", "cross", "kron",
    "conv2d", "silu", "softplus", "nan_to_num", "renorm", "histc", "bincount", "unique", "flip",
    "roll", "repeat", "repeat_interleave", "tile", "cummax", "cummin", "logcumsumexp",
    "nansum", "nanmean", "quantile", "true_divide", "floor_divide", "exp2", "frac", "trunc",
    "heaviside", "hypot", "sgn", "square_", "clamp_min_", "clamp_max_", "lt_", "gt_",
    "addr", "ger", "chain_matmul", "numpy",
})

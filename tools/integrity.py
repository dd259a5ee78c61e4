"""Locked: the integrity of the harness's own process, where candidate code runs beside it
(docs/security.md, threats 2, 11, 13, 22, 23).

`snapshot_integrity()` is taken before the candidate's module is imported and
`verify_integrity(snapshot)` compared after it (and after its calls): the timers,
synchronizers, comparison functions, builtins, sys.modules entries, import hooks and the
harness's own modules it relies on must be the very objects they were. `precision_flags()` (the
settings that change numerics) and the thread counts (`native_threads`, `thread_baseline`) are
compared separately, each under a check of its own.

Imports only torch, the standard library and the op guard (op_guard.py), so it runs from the
pristine tools/ copy on its own.
"""

from __future__ import annotations

import builtins
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import op_guard
import torch

# Captured at import, before any candidate code runs in this process.
_len_dispatch_modes = getattr(torch._C, "_len_torch_dispatch_stack", None)
_len_function_modes = getattr(torch._C, "_len_torch_function_stack", None)


# Objects whose identity the timing and checking code relies on, reported by name.
def _watched_objects() -> dict[str, object]:
    watched: dict[str, object] = {}

    def watch(label: str, owner: object, attr: str) -> None:
        if owner is not None and hasattr(owner, attr):
            # Class attributes are read from __dict__ so descriptors compare as stored.
            container = getattr(owner, "__dict__", {})
            watched[label] = container[attr] if attr in container else getattr(owner, attr)

    for attr in (
        "perf_counter",
        "perf_counter_ns",
        "monotonic",
        "monotonic_ns",
        "time",
        "time_ns",
        "process_time",
        "process_time_ns",
        "thread_time",
        "thread_time_ns",
        "sleep",
    ):
        watch(f"time.{attr}", time, attr)
    cuda = torch.cuda
    for attr in (
        "synchronize",
        "Event",
        "Stream",
        "current_stream",
        "default_stream",
        "is_available",
        "elapsed_time" if hasattr(cuda, "elapsed_time") else "synchronize",
    ):
        watch(f"torch.cuda.{attr}", cuda, attr)
    for cls_name in ("Event", "Stream"):
        cls = getattr(cuda, cls_name, None)
        for attr in (
            "elapsed_time",
            "record",
            "synchronize",
            "query",
            "wait",
            "wait_event",
            "wait_stream",
            "record_event",
            "__init__",
            "__new__",
        ):
            watch(f"torch.cuda.{cls_name}.{attr}", cls, attr)
    for attr in ("assert_close", "make_tensor"):
        watch(f"torch.testing.{attr}", torch.testing, attr)
    for attr in (
        "allclose",
        "isclose",
        "equal",
        "eq",
        "ne",
        "abs",
        "sub",
        "max",
        "min",
        "isnan",
        "isinf",
        "count_nonzero",
        "where",
        "all",
        "any",
        "manual_seed",
        "randn",
        "rand",
        "Tensor",
        "inference_mode",
        "no_grad",
        "synchronize",
    ):
        watch(f"torch.{attr}", torch, attr)
    for attr in (
        "__eq__",
        "__ne__",
        "__lt__",
        "__le__",
        "__gt__",
        "__ge__",
        "__sub__",
        "__abs__",
        "__bool__",
        "__float__",
        "__len__",
        "__getitem__",
        "__torch_function__",
        "__torch_dispatch__",
        "allclose",
        "isclose",
        "equal",
        "eq",
        "abs",
        "sub",
        "max",
        "min",
        "item",
        "tolist",
        "all",
        "any",
        "clone",
        "copy_",
        "cpu",
        "to",
        "numpy",
        "data_ptr",
        "untyped_storage",
        "__reduce_ex__",
        "__deepcopy__",
        "__setstate__",
    ):
        watch(f"torch.Tensor.{attr}", torch.Tensor, attr)
    for attr in (
        "__call__",
        "_call_impl",
        "_wrapped_call_impl",
        "load_state_dict",
        "state_dict",
        "__getattr__",
        "__setattr__",
    ):
        watch(f"torch.nn.Module.{attr}", torch.nn.Module, attr)
    watch("torch.linalg.vector_norm", torch.linalg, "vector_norm")
    watch(
        "torch.utils._python_dispatch._get_current_dispatch_mode",
        torch.utils._python_dispatch,
        "_get_current_dispatch_mode",
    )
    for attr in ("dumps", "loads", "dump", "load"):
        watch(f"json.{attr}", sys.modules.get("json"), attr)
    watch("os._exit", os, "_exit")
    watch("sys.exit", sys, "exit")
    return watched


# Namespaces whose every callable is watched as well (identity only; additions are ignored
# because torch attaches lazily imported submodules as attributes).
def _watched_namespaces() -> dict[str, dict[str, object]]:
    spaces: dict[str, object] = {
        "torch": torch,
        "torch.Tensor": torch.Tensor,
        "torch.nn.functional": torch.nn.functional,
        "torch.testing": torch.testing,
        "torch.cuda": torch.cuda,
        "time": time,
        "torch.nn.Module": torch.nn.Module,
    }
    return {label: dict(vars(space)) for label, space in spaces.items()}


@dataclass
class IntegritySnapshot:
    """What the harness's process looked like before candidate code ran."""

    watched: dict[str, object]
    namespaces: dict[str, dict[str, object]]
    builtins: dict[str, object]
    modules: dict[str, object]
    meta_path: list[object]
    path_hooks: list[object]
    trace: object
    profile: object
    dispatch_modes: int
    function_modes: int
    reference_modules: tuple[str, ...]
    precision: dict[str, object] = field(default_factory=dict)
    harness: dict[str, object] = field(default_factory=dict)


_HARNESS_DIR = os.path.dirname(os.path.abspath(__file__))


def _harness_modules() -> dict[str, object]:
    """The harness's own modules in this process: those loaded from this file's folder."""
    found: dict[str, object] = {}
    for name, module in list(sys.modules.items()):
        origin = getattr(module, "__file__", None)
        if origin and os.path.dirname(os.path.abspath(origin)) == _HARNESS_DIR:
            found[name] = module
    return found


def _harness_state() -> dict[str, object]:
    """Every global of every harness module, and the code of every function and method in them.

    Candidate code can reach these modules (from C++ through pybind, say) and swap a function,
    its code object or a global such as a flush size; the timing and checking code would then
    run the candidate's version. Compared by identity after the candidate has run.
    """
    state: dict[str, object] = {}
    for mod_name, module in _harness_modules().items():
        for attr, value in list(vars(module).items()):
            state[f"{mod_name}.{attr}"] = value
            functions = [(attr, value)]
            if isinstance(value, type) and value.__module__ == mod_name:
                functions = [(f"{attr}.{k}", v) for k, v in vars(value).items()]
            for label, fn in functions:
                code = getattr(fn, "__code__", None)
                if code is not None and getattr(fn, "__module__", None) == mod_name:
                    state[f"{mod_name}.{label}.__code__"] = code
                    state[f"{mod_name}.{label}.__defaults__"] = fn.__defaults__
                    state[f"{mod_name}.{label}.__kwdefaults__"] = fn.__kwdefaults__
    return state


def _harness_changes(before: dict[str, object]) -> list[str]:
    now = _harness_state()
    return [f"harness {label} was replaced" for label, value in before.items() if now.get(label, _MISSING) is not value]


def snapshot_integrity(reference_modules: Sequence[str] = ("model",)) -> IntegritySnapshot:
    """Record the identities the harness relies on. Take it before importing the candidate.

    `reference_modules`: module names the candidate must not import or plant (the reference).
    """
    op_guard.warm_up()
    return IntegritySnapshot(
        watched=_watched_objects(),
        namespaces=_watched_namespaces(),
        builtins=dict(vars(builtins)),
        modules=dict(sys.modules),
        meta_path=list(sys.meta_path),
        path_hooks=list(sys.path_hooks),
        trace=sys.gettrace(),
        profile=sys.getprofile(),
        dispatch_modes=_len_dispatch_modes() if _len_dispatch_modes else 0,
        function_modes=_len_function_modes() if _len_function_modes else 0,
        reference_modules=tuple(reference_modules),
        precision=precision_flags(),
        harness=_harness_state(),
    )


def verify_integrity(snapshot: IntegritySnapshot) -> list[str]:
    """One line per thing the candidate changed in this process; empty when all is intact.

    Precision flags are not included: compare `precision_flags()` with `snapshot.precision`
    (see `diff_precision_flags`) and report them under their own check.
    """
    problems: list[str] = []
    now = _watched_objects()
    for label, obj in snapshot.watched.items():
        if now.get(label, _MISSING) is not obj:
            problems.append(f"{label} was replaced")
    reported = set(snapshot.watched)
    for label, before in snapshot.namespaces.items():
        space = _namespace_object(label)
        after = vars(space) if space is not None else {}
        for name, obj in before.items():
            full = f"{label}.{name}"
            if full in reported:
                continue
            if after.get(name, _MISSING) is not obj:
                problems.append(f"{full} was replaced")
    current_builtins = vars(builtins)
    for name, obj in snapshot.builtins.items():
        if current_builtins.get(name, _MISSING) is not obj:
            problems.append(f"builtins.{name} was replaced")
    for name in current_builtins.keys() - snapshot.builtins.keys():
        problems.append(f"builtins.{name} was added")
    for name, module in snapshot.modules.items():
        if sys.modules.get(name, _MISSING) is not module:
            problems.append(f"sys.modules[{name!r}] was replaced or removed")
    for name in snapshot.reference_modules:
        if name not in snapshot.modules and name in sys.modules:
            problems.append(f"the reference module {name!r} was imported by the candidate")
    if list(sys.meta_path) != snapshot.meta_path:
        problems.append("sys.meta_path was changed (import hooks)")
    if list(sys.path_hooks) != snapshot.path_hooks:
        problems.append("sys.path_hooks was changed (import hooks)")
    if sys.gettrace() is not snapshot.trace:
        problems.append("a trace function was installed (sys.settrace)")
    if sys.getprofile() is not snapshot.profile:
        problems.append("a profile function was installed (sys.setprofile)")
    if _len_dispatch_modes and _len_dispatch_modes() != snapshot.dispatch_modes:
        problems.append("a torch dispatch mode was left installed")
    if _len_function_modes and _len_function_modes() != snapshot.function_modes:
        problems.append("a torch function mode was left installed")
    problems.extend(_harness_changes(snapshot.harness))
    return problems


def _namespace_object(label: str) -> object | None:
    obj: object = {"torch": torch, "time": time}.get(label.split(".")[0])
    for part in label.split(".")[1:]:
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()


def native_threads() -> int:
    """Every thread of this process, native ones included (Python's count misses C++ threads)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:  # not Linux: Python's own count is the best there is
        import threading

        return threading.active_count()


def thread_baseline() -> int:
    """`native_threads()` after torch's intra-op pool exists, to compare with after the calls.

    The pool starts on the first parallel op, which may be the candidate's own; starting it
    here keeps an honest candidate from looking like it left threads behind.
    """
    torch.ones(1 << 18).sum()
    return native_threads()


def precision_flags() -> dict[str, object]:
    """The settings that change numerics: TF32, reduced-precision reductions, default dtype."""
    flags: dict[str, object] = {}

    def read(label: str, getter: Any) -> None:
        try:
            flags[label] = getter()
        except Exception:  # an API absent from this torch build: nothing to compare
            pass

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        matmul = torch.backends.cuda.matmul
        read("cuda.matmul.allow_tf32", lambda: matmul.allow_tf32)
        read(
            "cuda.matmul.allow_fp16_reduced_precision_reduction", lambda: matmul.allow_fp16_reduced_precision_reduction
        )
        read(
            "cuda.matmul.allow_bf16_reduced_precision_reduction", lambda: matmul.allow_bf16_reduced_precision_reduction
        )
        read("cudnn.allow_tf32", lambda: torch.backends.cudnn.allow_tf32)
        read("cudnn.enabled", lambda: torch.backends.cudnn.enabled)
        read("cudnn.deterministic", lambda: torch.backends.cudnn.deterministic)
        read("mkldnn.enabled", lambda: torch.backends.mkldnn.enabled)
        read("float32_matmul_precision", torch.get_float32_matmul_precision)
        read("default_dtype", lambda: str(torch.get_default_dtype()))
        read("deterministic_algorithms", torch.are_deterministic_algorithms_enabled)
        read("env.NVIDIA_TF32_OVERRIDE", lambda: os.environ.get("NVIDIA_TF32_OVERRIDE"))
    return flags


def diff_precision_flags(before: dict[str, object], after: dict[str, object]) -> list[str]:
    """One line per precision setting that differs, e.g. 'cuda.matmul.allow_tf32: False -> True'."""
    return [
        f"{key}: {before.get(key)!r} -> {after.get(key)!r}"
        for key in sorted(before.keys() | after.keys())
        if before.get(key) != after.get(key)
    ]

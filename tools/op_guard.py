"""Locked: the strict op guard, a dispatch mode that records every torch compute op reaching the
dispatcher during ModelNew.forward, whether it was issued from Python or from C++ through
at::/torch:: (docs/security.md, threats 14, 16, 27, 28, 37).

`StrictOpGuard` records against the allowed aten ops (`_ALLOWED_ATEN`: allocation, views,
copies, metadata); `warm_up()` runs one op under a dispatch mode so torch's lazy imports happen
before any snapshot or timed call. Imports only torch and the standard library, so it runs from
the pristine tools/ copy on its own.
"""

from __future__ import annotations

from typing import Any

import allowed_ops
import torch
from torch.utils._python_dispatch import TorchDispatchMode

# Captured at import, before any candidate code runs in this process.
_add = torch.add
_current_dispatch_mode = torch.utils._python_dispatch._get_current_dispatch_mode

_warmed = False


def is_warm() -> bool:
    return _warmed


def warm_up() -> None:
    """Run one op under a dispatch mode so torch's lazy imports happen now, not mid-check.

    The first op under any dispatch mode imports torch._dynamo and friends (about 800
    modules, most of a second), and torch._dynamo re-wraps a few torch functions such as
    torch.manual_seed. Done before the snapshot, that is neither a false integrity alarm nor a
    cost inside the first verified call. Idempotent and cheap after the first call.
    """
    global _warmed
    if _warmed:
        return
    probe = torch.ones(2)
    with StrictOpGuard("strict"):
        _add(probe, probe)
    _warmed = True


_ALLOWED_ATEN = allowed_ops.ALLOWED_ATEN
_ACCUMULATING = allowed_ops.ACCUMULATING


def _accumulates(args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> bool:
    if kwargs and "accumulate" in kwargs:
        return bool(kwargs["accumulate"])
    return len(args) > 3 and bool(args[3])


# Namespaces of dispatcher ops that are bookkeeping rather than compute.
_ALLOWED_NAMESPACES = frozenset({"profiler"})


class _RecordingMode(TorchDispatchMode):
    def __init__(self, guard: "StrictOpGuard") -> None:
        super().__init__()
        self._guard = guard

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        self._guard.dispatched += 1
        namespace = getattr(func, "namespace", "")
        if namespace == "aten":
            base = func._schema.name.split("::", 1)[1]
            if base not in _ALLOWED_ATEN:
                self._guard._record(f"{namespace}.{func.__name__}")
            elif base in _ACCUMULATING and _accumulates(args, kwargs):
                # An allowed op may only do what its name says: an accumulating index_put is a
                # scatter-add, a reduction spelled as a copy.
                self._guard._record(f"{namespace}.{func.__name__}(accumulate=True)")
        elif namespace not in _ALLOWED_NAMESPACES:
            # prims are compute; a custom dispatcher op hides the ops it runs inside it, because
            # this mode is not active while an op's own kernel runs.
            self._guard._record(f"{namespace}.{func.__name__}")
        return func(*args, **(kwargs or {}))


class StrictOpGuard:
    """Records torch compute ops run while active; a no-op unless the policy is strict.

    Ops reach a dispatch mode from Python (torch.relu, F.relu, x.relu(), x + y, torch.ops.aten)
    and from C++ extensions calling at::/torch:: functions through the dispatcher, so a binding
    that returns at::matmul(x, w) is caught here, while torch::empty for the output is not.
    C++ that calls at::native:: / at::cpu:: kernels directly skips the dispatcher; the static
    checker rejects those names. Recording (not raising) lets forward finish, so the harness
    reports every op at once under the check "torch_ops".
    """

    def __init__(self, policy: str = "strict") -> None:
        self.policy = policy
        self.violations: list[str] = []
        self.counts: dict[str, int] = {}
        # Every op that passed through the mode, allowed or not: each costs the call a Python
        # dispatch, which the null blocks' stand-in repeats (tools/serving.py).
        self.dispatched = 0
        self._mode: _RecordingMode | None = None

    @property
    def active(self) -> bool:
        return self.policy == "strict"

    def _record(self, op: str) -> None:
        if op not in self.counts:
            self.violations.append(op)
            self.counts[op] = 0
        self.counts[op] += 1

    def __enter__(self) -> "StrictOpGuard":
        if self.active:
            self._mode = _RecordingMode(self)
            self._mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        mode, self._mode = self._mode, None
        if mode is None:
            return
        if _current_dispatch_mode() is not mode:
            # The candidate popped or buried the guard's mode: that is itself a violation, and
            # popping blindly would remove someone else's mode.
            self.violations.append("the strict op guard was removed or covered during forward")
            return
        mode.__exit__(*exc)

    def detail(self) -> str:
        if not self.violations:
            return "no torch compute ops in forward"
        ops = ", ".join(f"{op} x{self.counts.get(op, 1)}" for op in self.violations[:8])
        more = f" and {len(self.violations) - 8} more" if len(self.violations) > 8 else ""
        return f"forward ran torch compute ops under strict policy: {ops}{more}"

"""Locked: the meter on a candidate's compiled extension, in the candidate's process.

It counts calls into the extension's functions and the time spent inside them: on the CPU the
time inside the extension is what shows that it did the work, not merely that one of its
functions was entered (harness/extension_check.py decides). What it measures is a claim, made
where the candidate's code runs.
"""

from __future__ import annotations

import time
from typing import Any

_clock = time.perf_counter


class ExtensionMeter:
    """Counts calls into a compiled extension's functions and the time spent inside them.

    Wrapping happens before model_new.py is imported, so `from cuda_extension import f` and
    `cuda_extension.f` both reach the wrapper. On the CPU the time inside the extension is what
    shows that it did the work, not merely that one of its functions was entered.
    """

    def __init__(self) -> None:
        self.calls = 0
        self.seconds = 0.0
        self.wrapped: list[str] = []

    def wrap_module(self, module: Any) -> Any:
        for attr in dir(module):
            fn = getattr(module, attr)
            if attr.startswith("__") or not callable(fn) or type(fn).__name__ != "builtin_function_or_method":
                continue
            setattr(module, attr, self._wrap(fn))
            self.wrapped.append(attr)
        return module

    def _wrap(self, fn: Any) -> Any:
        meter = self

        def metered(*args: Any, **kwargs: Any) -> Any:
            meter.calls += 1
            t0 = _clock()
            try:
                return fn(*args, **kwargs)
            finally:
                meter.seconds += _clock() - t0

        metered.__name__ = getattr(fn, "__name__", "extension_function")
        metered.__doc__ = fn.__doc__
        return metered


def hook_extension_builders(meter: ExtensionMeter) -> None:
    """Wrap modules that load_inline/load build, so their calls are metered like cuda_extension's."""
    import torch.utils.cpp_extension as ce

    for name in ("load_inline", "load"):
        original = getattr(ce, name)

        def hooked(*args: Any, __original: Any = original, **kwargs: Any) -> Any:
            module = __original(*args, **kwargs)
            return meter.wrap_module(module) if hasattr(module, "__dict__") else module

        setattr(ce, name, hooked)

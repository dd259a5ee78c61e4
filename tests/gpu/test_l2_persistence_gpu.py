"""The harness's call on the CUDA device against inputs kept in a persisting part of the L2
(run on a GPU machine: pytest -m gpu tests/gpu)."""

from __future__ import annotations

import ctypes
import statistics
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

pytestmark = pytest.mark.gpu

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

from l2_persistence import (  # noqa: E402
    ACCESS_POLICY_WINDOW,
    MAX_PERSISTING_L2_ATTRIBUTE,
    PERSISTING,
    PERSISTING_L2_LIMIT,
    STREAMING,
    AccessPolicyWindow,
    persisting_l2_reset,
)


@pytest.fixture(scope="module")
def driver() -> Any:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    torch.cuda.init()
    lib = ctypes.CDLL("libcuda.so.1")
    most = ctypes.c_int(0)
    lib.cuDeviceGetAttribute(ctypes.byref(most), MAX_PERSISTING_L2_ATTRIBUTE, torch.cuda.current_device())
    if most.value < 16 << 20:
        pytest.skip("this device sets aside too little L2 for persisting lines")
    lib.most = most.value
    return lib


def _keeping(driver: Any, fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`fn` as a candidate's process could make it: the L2 set aside for persisting lines once,
    and on every call a window over the call's inputs on the current stream, where the harness
    copies and perturbs the next call's inputs (the caching allocator hands the block back)."""
    import torch

    asked = []

    def call(t: Any) -> Any:
        if not asked:
            driver.cuCtxSetLimit(ctypes.c_int(PERSISTING_L2_LIMIT), ctypes.c_size_t(driver.most))
            asked.append(True)
        size = t.numel() * t.element_size()
        window = AccessPolicyWindow(
            ctypes.c_void_p(t.data_ptr()), size, min(1.0, driver.most / size), PERSISTING, STREAMING
        )
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        driver.cuStreamSetAttribute(stream, ACCESS_POLICY_WINDOW, ctypes.byref(window))
        return fn(t)

    return call


def _median_call_us(fn: Callable[[Any], Any], reset: bool, calls: int = 40) -> float:
    import torch
    from timing import Caller

    x = torch.randn(6144, 1024, device="cuda")  # 24 MB, read once by a row sum
    caller = Caller("cuda")
    if not reset:
        caller._reset_l2 = None
    times = []
    for i in range(calls + 5):
        _, us, _ = caller.run(fn, caller.prepare([x]), seed=i)
        times.append(us)
    return statistics.median(times[5:])


def _row_sum(t: Any) -> Any:
    return t.sum(dim=-1)


def test_inputs_kept_in_a_persisting_l2_are_flushed_like_any_others(driver) -> None:
    assert persisting_l2_reset() is not None
    plain = _median_call_us(_row_sum, reset=True)
    try:
        # Without the reset the lines outlive the flush: the call reads its inputs from L2.
        kept_unreset = _median_call_us(_keeping(driver, _row_sum), reset=False)
        kept = _median_call_us(_keeping(driver, _row_sum), reset=True)
    finally:
        driver.cuCtxSetLimit(ctypes.c_int(PERSISTING_L2_LIMIT), ctypes.c_size_t(0))
        driver.cuCtxResetPersistingL2Cache()
    assert kept_unreset < 0.93 * plain, f"kept without the reset {kept_unreset:.2f} us, plain {plain:.2f} us"
    assert kept >= 0.97 * plain, f"kept {kept:.2f} us against plain {plain:.2f} us"


def test_the_reset_leaves_no_l2_set_aside(driver) -> None:
    """After a call whose code set part of the L2 aside, none is left when the call returns: the
    baselines, timed next while this process waits, get the whole L2."""
    import torch
    from timing import Caller

    caller = Caller("cuda")
    x = torch.randn(1024, 1024, device="cuda")
    caller.run(_keeping(driver, _row_sum), caller.prepare([x]), seed=1)
    left = ctypes.c_size_t(1)
    assert driver.cuCtxGetLimit(ctypes.byref(left), ctypes.c_int(PERSISTING_L2_LIMIT)) == 0
    assert left.value == 0

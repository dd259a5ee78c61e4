"""What keeping a call's inputs in a persisting part of the L2 buys across the harness's flush,
and what taking it back before every call costs. (CUDA only.)

One process, one memory-bound call (a row sum over 24 MB, read once), made the harness's way
(tools/timing.py's Caller: lead-in, perturbation of the inputs, 256 MB flush, events,
synchronize) in three ways, median of N calls each:

- plain: nothing set aside;
- kept: the call sets the L2 aside for persisting lines as far as the device allows (once), and
  gives the current stream an access-policy window over the addresses its inputs have had, as
  a candidate's process could (tests/adversarial/candidates_gpu/g_keep_inputs_in_l2), with the
  harness's reset switched off;
- kept, reset: the same with the harness's reset (tools/l2_persistence.py) around every call.

Then the reset's own cost on the host (median of 1000 calls, with and without a set-aside to
take back).

    python benchmarks/l2_kept_inputs.py --gpu [--calls 60]
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

# CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, from cuda.h.
_MAX_WINDOW = 109


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", action="store_true", help="required: this runs on a CUDA device")
    parser.add_argument("--calls", type=int, default=60)
    args = parser.parse_args()
    import torch

    if not args.gpu or not torch.cuda.is_available():
        print("error: needs --gpu and a CUDA device", file=sys.stderr)
        return 2
    from l2_persistence import (
        ACCESS_POLICY_WINDOW,
        MAX_PERSISTING_L2_ATTRIBUTE,
        PERSISTING,
        PERSISTING_L2_LIMIT,
        STREAMING,
        AccessPolicyWindow,
        persisting_l2_reset,
    )
    from timing import Caller

    driver = ctypes.CDLL("libcuda.so.1")
    most, widest = ctypes.c_int(0), ctypes.c_int(0)
    driver.cuDeviceGetAttribute(ctypes.byref(most), MAX_PERSISTING_L2_ATTRIBUTE, 0)
    driver.cuDeviceGetAttribute(ctypes.byref(widest), _MAX_WINDOW, 0)
    props = torch.cuda.get_device_properties(0)
    print(
        f"{props.name}: L2 {props.L2_cache_size >> 20} MB, persisting at most {most.value >> 20} MB, "
        f"window at most {widest.value >> 20} MB"
    )

    x = torch.randn(6144, 1024, device="cuda")

    def row_sum(t: torch.Tensor) -> torch.Tensor:
        return t.sum(dim=-1)

    def keeping(base_fn):
        """`base_fn`, made the way g_keep_inputs_in_l2 makes its calls: the set-aside asked for
        once, and a window over every address an input has had, set on the current stream."""
        span = [None, None]
        asked = [False]

        def fn(t: torch.Tensor) -> torch.Tensor:
            if not asked[0]:
                driver.cuCtxSetLimit(ctypes.c_int(PERSISTING_L2_LIMIT), ctypes.c_size_t(most.value))
                asked[0] = True
            start, nbytes = t.data_ptr(), t.numel() * t.element_size()
            span[0] = start if span[0] is None else min(span[0], start)
            span[1] = start + nbytes if span[1] is None else max(span[1], start + nbytes)
            size = min(span[1] - span[0], widest.value)
            window = AccessPolicyWindow(
                ctypes.c_void_p(span[1] - size), size, min(1.0, most.value / size), PERSISTING, STREAMING
            )
            driver.cuStreamSetAttribute(
                ctypes.c_void_p(torch.cuda.current_stream().cuda_stream), ACCESS_POLICY_WINDOW, ctypes.byref(window)
            )
            return base_fn(t)

        return fn

    results: dict[str, float] = {}
    for name, kept, reset in (("plain", False, False), ("kept", True, False), ("kept, reset", True, True)):
        caller = Caller("cuda")
        if not reset:
            caller._reset_l2 = None  # the harness without its reset, for this measurement only
        fn = keeping(row_sum) if kept else row_sum
        times = []
        for i in range(args.calls + 5):
            _, us, _ = caller.run(fn, caller.prepare([x]), seed=i)
            if i >= 5:
                times.append(us)
        results[name] = statistics.median(times)
        driver.cuCtxSetLimit(ctypes.c_int(PERSISTING_L2_LIMIT), ctypes.c_size_t(0))
        driver.cuCtxResetPersistingL2Cache()
    for name, us in results.items():
        print(f"{name:12s} {us:8.2f} us  ({results['plain'] / us:.2f}x plain)")

    reset_l2 = persisting_l2_reset()
    assert reset_l2 is not None
    for label, set_aside in (("nothing set aside", False), ("a set-aside to take back", True)):
        spent = []
        for _ in range(1000):
            if set_aside:
                driver.cuCtxSetLimit(ctypes.c_int(PERSISTING_L2_LIMIT), ctypes.c_size_t(most.value))
            t0 = time.perf_counter_ns()
            reset_l2()
            spent.append((time.perf_counter_ns() - t0) / 1000.0)
        print(f"reset, {label}: median {statistics.median(spent):.1f} us, max {max(spent):.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())

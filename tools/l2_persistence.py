"""Locked: takes back, around every call, any part of the L2 a process set aside for persisting
accesses.

A process can set aside part of the device's L2 for persisting lines (the context's
CU_LIMIT_PERSISTING_L2_CACHE_SIZE) and give a stream an access-policy window: accesses inside it
leave persisting lines, which the normal accesses of the L2 flush do not evict. A candidate's
process that did this on the stream the harness copies and perturbs inputs on would start its
calls with their inputs in L2 where the baselines start cold, and the L2 it set aside would stay
set aside while the baselines run. So before every call and after it, the current stream's window
is cleared, the set-aside is put back to none and every persisting line is made normal again.
Torch does not expose these calls; the driver's library, loaded in every CUDA process, does.
"""

from __future__ import annotations

import ctypes
from typing import Callable

import torch

# From cuda.h: CU_LIMIT_PERSISTING_L2_CACHE_SIZE, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW (a
# stream attribute too), CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE and
# CU_ACCESS_PROPERTY_PERSISTING / _STREAMING.
PERSISTING_L2_LIMIT = 0x06
ACCESS_POLICY_WINDOW = 1
MAX_PERSISTING_L2_ATTRIBUTE = 108
PERSISTING, STREAMING = 2, 1


class AccessPolicyWindow(ctypes.Structure):
    """A stream's access-policy window (CUaccessPolicyWindow) in its attribute's value, a union
    padded to 64 bytes; all zero, no window."""

    _fields_ = [
        ("base_ptr", ctypes.c_void_p),
        ("num_bytes", ctypes.c_size_t),
        ("hit_ratio", ctypes.c_float),
        ("hit_prop", ctypes.c_int),
        ("miss_prop", ctypes.c_int),
        ("pad", ctypes.c_char * 36),
    ]


# CUDA_ERROR_UNSUPPORTED_LIMIT and CUDA_ERROR_NOT_SUPPORTED: a device without a persisting L2.
_NOT_SUPPORTED = (215, 801)


class L2PersistenceError(RuntimeError):
    """The persisting L2 could not be taken back: a call would not start cold."""


def persisting_l2_reset() -> Callable[[], None] | None:
    """A function that clears the current stream's access-policy window, sets the persisting L2
    set-aside to none and resets every persisting line; None where the driver has no such calls
    (no persisting L2 to take back). Bound now, before any candidate code exists."""
    try:
        driver = ctypes.CDLL("libcuda.so.1")
        set_limit, get_limit = driver.cuCtxSetLimit, driver.cuCtxGetLimit
        reset_lines, set_attribute = driver.cuCtxResetPersistingL2Cache, driver.cuStreamSetAttribute
    except (OSError, AttributeError):
        return None
    set_limit.argtypes, set_limit.restype = [ctypes.c_int, ctypes.c_size_t], ctypes.c_int
    get_limit.argtypes, get_limit.restype = [ctypes.POINTER(ctypes.c_size_t), ctypes.c_int], ctypes.c_int
    reset_lines.argtypes, reset_lines.restype = [], ctypes.c_int
    set_attribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    set_attribute.restype = ctypes.c_int
    limit = ctypes.c_size_t(0)
    torch.cuda.synchronize()  # the runtime's context, current on this thread: the driver's calls act on it
    found = get_limit(ctypes.byref(limit), PERSISTING_L2_LIMIT)
    if found in _NOT_SUPPORTED:
        return None  # this device has no persisting L2
    if found != 0:
        raise L2PersistenceError(f"the driver would not say how much L2 is set aside (CUresult {found})")
    no_window = AccessPolicyWindow()
    current_stream = torch.cuda.current_stream

    def reset() -> None:
        # A stream the driver refuses an attribute on (the legacy default stream on some
        # drivers) has no window to clear; what decides is the set-aside below.
        stream = ctypes.c_void_p(current_stream().cuda_stream)
        set_attribute(stream, ACCESS_POLICY_WINDOW, ctypes.byref(no_window))
        if get_limit(ctypes.byref(limit), PERSISTING_L2_LIMIT) == 0 and limit.value:
            set_limit(PERSISTING_L2_LIMIT, 0)
            if get_limit(ctypes.byref(limit), PERSISTING_L2_LIMIT) != 0 or limit.value:
                raise L2PersistenceError(f"the persisting L2 set-aside stays at {limit.value} bytes")
        # The lines left persisting while the set-aside was there (it may have been set and put
        # back to none in between): made normal, so the flush evicts them.
        reset_lines()

    return reset

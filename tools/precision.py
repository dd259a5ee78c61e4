"""Locked: the precision a candidate is verified at, and the error that precision allows.

By default a kernel answers to the module's own dtype: its error from the float64 truth may be
at most ANCHOR times eager's own error at that dtype, with a floor for what an honest kernel at
that dtype cannot avoid (accumulating in float32, rounding its output once). That floor is far
below what computing in a narrower format costs: a float32 GEMM on float16 or TF32 tensor cores
is off by about 3e-4 of its norm, bfloat16 weights by about 1e-3, where eager's error is near
1e-7 and the floor 3e-5 (docs/security.md, threat 41).

A narrower compute format is a choice the user names (`--precision tf32|fp16|bf16`), and the
result names it too; `kernelbench` is the paper's tolerance (atol = rtol = 1e-2, with eager's
error anchoring only outputs inside atol), for comparing with published numbers. Standard
library only: the harness reads the names and the rules from here as the judge does.
"""

from __future__ import annotations

from typing import Literal, get_args

Mode = Literal["dtype", "tf32", "fp16", "bf16", "kernelbench"]
MODES: tuple[str, ...] = get_args(Mode)
DEFAULT: Mode = "dtype"

# The candidate's error from the float64 reference may be up to this many times eager's own.
ANCHOR = 8.0

# Machine epsilon of each floating dtype (torch.finfo(dtype).eps), by torch's name for it.
EPS = {
    "torch.float64": 2.0**-52,
    "torch.float32": 2.0**-23,
    "torch.float16": 2.0**-10,
    "torch.bfloat16": 2.0**-7,
}
# An honest kernel accumulates in float32 at least and rounds its output once: the error of a
# long float32 accumulation (about eps * sqrt(n) for n up to 2^16), or twice the output's own
# rounding at a narrower dtype, whichever is larger.
ACCUMULATION_EPS = 256.0
OUTPUT_EPS = 2.0
# A compute format the user opted into: eight of its unit roundoffs (TF32 and float16 keep 10
# bits of mantissa, bfloat16 7).
OPT_IN_UNIT = {"tf32": 2.0**-11, "fp16": 2.0**-11, "bf16": 2.0**-8}
OPT_IN_UNITS = 8.0

# The paper's tolerance, and its floor on the relative error (the old default).
KERNELBENCH_TOL = 1e-2


def floor(dtype: str, mode: str = DEFAULT) -> float:
    """The relative error any honest kernel may have at `dtype` under `mode`, whatever eager's."""
    eps = EPS.get(dtype, EPS["torch.float32"])
    accumulate = EPS["torch.float64"] if dtype == "torch.float64" else EPS["torch.float32"]
    base = max(ACCUMULATION_EPS * accumulate, OUTPUT_EPS * eps)
    if mode in OPT_IN_UNIT:
        return max(base, OPT_IN_UNITS * OPT_IN_UNIT[mode])
    return base


def limit(dtype: str, eager_rel: float, mode: str = DEFAULT, rtol: float = KERNELBENCH_TOL) -> float:
    """The largest ||candidate - float64|| / ||float64|| allowed, given eager's own."""
    if mode == "kernelbench":
        return max(2.0 * eager_rel, rtol, 8.0 * EPS.get(dtype, EPS["torch.float32"]))
    return max(ANCHOR * eager_rel, floor(dtype, mode))


def rule(mode: str = DEFAULT) -> str:
    """How the relative error is judged, in words for a check's detail."""
    if mode == "kernelbench":
        return f"at most 2 times eager's own or rtol={KERNELBENCH_TOL:g} (the KernelBench tolerance)"
    if mode in OPT_IN_UNIT:
        return f"at most {ANCHOR:g} times eager's own, or {mode} compute's own rounding"
    return f"at most {ANCHOR:g} times eager's own at the module's dtype, or its dtype's floor"


def name(mode: str, dtypes: list[str]) -> str:
    """What a result says it was verified at: the module's dtype by default ("float32"), else
    the opted-in format ("tf32"), or "kernelbench"."""
    if mode == "dtype":
        floating = [d for d in dtypes if d in EPS]
        return (floating[0] if floating else "float32").removeprefix("torch.")
    return mode

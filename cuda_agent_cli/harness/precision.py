"""The precision a candidate is verified at, as the harness's callers name it.

The rules themselves are the locked judge's (tools/precision.py, standard library only, read
here from the package's copy): by default the module's own dtype; `tf32`, `fp16` and `bf16` for
a narrower compute format the user opts into; `kernelbench` for the paper's atol = rtol = 1e-2.
"""

from __future__ import annotations

from cuda_agent_cli.assets.tools import precision as _rules
from cuda_agent_cli.errors import BadInput

MODES: tuple[str, ...] = _rules.MODES
DEFAULT: str = _rules.DEFAULT


def check_precision(mode: str | None) -> str:
    """`mode`, or the default; BadInput (exit 2) for a name the judge does not know."""
    if mode is None or mode == "":
        return DEFAULT
    if mode not in MODES:
        raise BadInput(
            f"unknown precision {mode!r}",
            "use --precision dtype (the module's own), tf32, fp16, bf16, or kernelbench (atol = rtol = 1e-2)",
        )
    return mode

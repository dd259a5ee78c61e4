"""Did the extension do the work: the kernels its sources define, the library calls strict
allows, and the check on what ran during forward (a profiler's kernels on CUDA, the time spent
inside the extension's functions on the CPU); and, on CUDA under strict, that none of torch's own
compute kernels ran beside them."""

from __future__ import annotations

import re
import statistics
from typing import Sequence

from cuda_agent_cli.config import Policy
from cuda_agent_cli.harness_result import Check

_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\([^)]*\)")
_GLOBAL_FN = re.compile(r"__global__\s+[^;{()]*?\b(\w+)\s*\(")


# The library calls strict allows (docs/security.md): a GEMM through cuBLAS or cuBLASLt, a
# convolution through cuDNN. A candidate that makes one launches the library's kernels, not its own.
_LIBRARY_CALL = re.compile(
    r"\bcublas(?:Lt)?\w*(?:[Gg]emm|Matmul)\w*\s*\(|\bat::cuda::blas::gemm\w*|"
    r"\bcudnnConvolution(?:Forward|BiasActivationForward)\s*\("
)
# Kernels those libraries launch, as a profiler names them.
_LIBRARY_KERNEL = re.compile(
    r"gemm|cutlass|xmma|cublas|cudnn|conv|implicit_convolve|wgrad|dgrad|nchw|nhwc", re.IGNORECASE
)


def library_calls_in_sources(sources: list[str]) -> bool:
    """Whether the sources call a GEMM or a convolution of the libraries strict allows."""
    return any(_LIBRARY_CALL.search(text) for text in sources)


def kernel_names_in_sources(sources: list[str]) -> set[str]:
    """Names of the __global__ functions defined in CUDA sources (kernels a profiler can see)."""
    names: set[str] = set()
    for text in sources:
        for m in _GLOBAL_FN.finditer(_LAUNCH_BOUNDS.sub(" ", text)):
            if m.group(1) not in {"void", "static", "inline"}:
                names.add(m.group(1))
    return names


# On the CPU, the share of forward's time that must be spent inside the extension's functions.
# Under hybrid, torch may do the work beside a call that does nothing. Under strict no torch
# compute can run beside the kernel (the op guard sees it), and forward's own allocations pass
# through that guard, which can cost more than a small kernel: entering the extension is enough.
EXTENSION_SHARE: dict[Policy, float] = {"strict": 0.0, "hybrid": 0.05}


def extension_kernel_check(
    device: str,
    ext_calls: int,
    profiled: list[str] | None,
    source_kernels: set[str],
    profiler_error: str | None = None,
    *,
    ext_shares: Sequence[float] = (),
    policy: Policy = "strict",
    library_calls: bool = False,
) -> Check:
    """Did code from the built extension actually do the work of the candidate's calls?

    CPU: the extension's functions were wrapped before model_new.py was imported; they must be
    entered, and under hybrid forward must spend a share of its time inside them (5%;
    the median over the calls, so one call slowed by the machine does not decide): one call to
    a function that does nothing is not a kernel. CUDA: the profiler must show at
    least one kernel defined in the candidate's sources, or, where the sources call a GEMM of
    cuBLAS/cuBLASLt or a convolution of cuDNN (what strict allows), a kernel of that library
    launched by an entered extension function.
    """
    if device != "cuda":
        if ext_calls <= 0:
            return Check(
                "extension_kernel",
                False,
                "no function of the compiled extension ran during forward: call your kernel from ModelNew.forward",
            )
        share = statistics.median(ext_shares) if ext_shares else 1.0
        need = EXTENSION_SHARE.get(policy, EXTENSION_SHARE["strict"])
        detail = f"extension functions entered {ext_calls} time(s), {share:.0%} of forward's time spent in them"
        if share < need:
            return Check(
                "extension_kernel",
                False,
                f"{detail}; at least {need:.0%} is needed under {policy}: the "
                "extension must do the work, not only be called",
            )
        return Check("extension_kernel", True, detail)
    if profiled is None:
        return Check("extension_kernel", False, f"the profiler could not run: {profiler_error or 'unknown error'}")
    ran = sorted({k for k in source_kernels if any(re.search(rf"\b{re.escape(k)}\b", p) for p in profiled)})
    if ran:
        return Check("extension_kernel", True, f"extension kernels ran: {', '.join(ran[:5])}")
    if library_calls and ext_calls > 0:
        library = [p for p in profiled if _LIBRARY_KERNEL.search(p)]
        if library:
            return Check("extension_kernel", True, f"the extension's library GEMM/convolution ran: {library[0][:80]}")
    seen = ", ".join(p[:60] for p in profiled[:4]) or "no GPU kernels at all"
    return Check(
        "extension_kernel",
        False,
        f"none of your __global__ kernels ({', '.join(sorted(source_kernels)[:5]) or 'none found'}) ran during "
        f"forward; the profiler saw: {seen}",
    )


# Torch's own CUDA kernels live in at::native; of those, the ones that only move or fill memory
# are what strict allows beside a kernel (the op guard's data-movement ops: copies, fills,
# concatenation, indexing). Anything else of at::native is torch compute.
_TORCH_KERNEL = re.compile(r"\bat::native::")
_TORCH_DATA_MOVEMENT = re.compile(
    r"[Cc]opy(?!sign)|FillFunctor|fill_kernel|CatArray|index_elementwise|indexSelect|index_put_kernel|"
    r"vectorized_gather|arange|linspace|range_cuda"
)


_NAME_NOISE = re.compile(r"\bvoid |at::native::|\(anonymous namespace\)::|::\{lambda\(\)#\d+\}::operator\(\)\(\) const")


def short_kernel_name(name: str, limit: int = 160) -> str:
    """A profiler's kernel name without its namespaces and lambda scaffolding: what it computes
    (launch_clamp_scalar, FillFunctor) within the first words, where the full name starts with
    pages of template arguments."""
    return _NAME_NOISE.sub("", name)[:limit]


def torch_kernels_check(device: str, policy: Policy, profiled: list[str] | None) -> Check | None:
    """Under strict on CUDA: did torch compute on the device during forward, as the profiler saw it?

    The op guard sees ops dispatched in the candidate's process, and C++ there can switch its
    dispatch key off around a call; the kernels that ran cannot be switched off that way. None
    where there is nothing to say (the CPU, hybrid, or no profile: extension_kernel says so).
    """
    if device != "cuda" or policy != "strict" or profiled is None:
        return None
    compute = [p for p in profiled if _TORCH_KERNEL.search(p) and not _TORCH_DATA_MOVEMENT.search(p)]
    if compute:
        return Check(
            "torch_kernels",
            False,
            f"torch's own compute kernels ran during forward under strict: "
            f"{'; '.join(short_kernel_name(c) for c in compute[:3])}; "
            "do the work in your kernels (or choose the hybrid policy)",
        )
    return Check("torch_kernels", True, "no torch compute kernels ran during forward")

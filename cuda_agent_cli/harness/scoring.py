"""Pure functions that turn raw measurements into verdicts: reward, speedups, review warnings."""

from __future__ import annotations

import ast
import re
import statistics

from cuda_agent_cli.harness.result import Check

MARGIN = 0.05  # "faster" means more than 5% faster (the paper's rule)
REVIEW_SPEEDUP = 10.0


def reward_for(correct: bool, speedup_vs_eager: float | None, speedup_vs_compile: float | None) -> int | None:
    """-1 when not correct; None when correct but untimed; else 3, 2 or 1 (the paper's reward)."""
    if not correct:
        return -1
    if speedup_vs_eager is None:
        return None
    faster_eager = speedup_vs_eager > 1 + MARGIN
    faster_compile = speedup_vs_compile is not None and speedup_vs_compile > 1 + MARGIN
    if faster_eager and faster_compile:
        return 3
    if faster_eager:
        return 2
    return 1


def median_us(values: list[float]) -> float:
    if not values:
        raise ValueError("no timed calls")
    return float(statistics.median(values))


def relative_spread(values: list[float]) -> float:
    """(max - min) / median: how far repeated measurements of one thing disagree."""
    mid = statistics.median(values)
    return (max(values) - min(values)) / mid if mid else 0.0


_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\([^)]*\)")
_GLOBAL_FN = re.compile(r"__global__\s+[^;{()]*?\b(\w+)\s*\(")


def kernel_names_in_sources(sources: list[str]) -> set[str]:
    """Names of the __global__ functions defined in CUDA sources (kernels a profiler can see)."""
    names: set[str] = set()
    for text in sources:
        for m in _GLOBAL_FN.finditer(_LAUNCH_BOUNDS.sub(" ", text)):
            if m.group(1) not in {"void", "static", "inline"}:
                names.add(m.group(1))
    return names


def extension_kernel_check(device: str, ext_calls: int, profiled: list[str] | None,
                           source_kernels: set[str], profiler_error: str | None = None) -> Check:
    """Did code from the built extension actually run during the candidate's calls?

    CPU: the extension's functions were wrapped before model_new.py was imported and must be
    entered. CUDA: the profiler must show at least one kernel defined in the candidate's sources.
    """
    if device != "cuda":
        if ext_calls > 0:
            return Check("extension_kernel", True, f"extension functions entered {ext_calls} time(s)")
        return Check("extension_kernel", False,
                     "no function of the compiled extension ran during forward: call your kernel from ModelNew.forward")
    if profiled is None:
        return Check("extension_kernel", False, f"the profiler could not run: {profiler_error or 'unknown error'}")
    ran = sorted({k for k in source_kernels if any(re.search(rf"\b{re.escape(k)}\b", p) for p in profiled)})
    if ran:
        return Check("extension_kernel", True, f"extension kernels ran: {', '.join(ran[:5])}")
    seen = ", ".join(p[:60] for p in profiled[:4]) or "no GPU kernels at all"
    return Check("extension_kernel", False,
                 f"none of your __global__ kernels ({', '.join(sorted(source_kernels)[:5]) or 'none found'}) ran during "
                 f"forward; the profiler saw: {seen}")


def review_warnings(speedup_vs_eager: float, speedup_vs_compile: float, candidate_us: float,
                    floor_us: float | None, wall_median_us: float | None, event_median_us: float) -> list[str]:
    """Results too good to trust without a look: flagged for review, not failed."""
    out: list[str] = []
    best = max(speedup_vs_eager, speedup_vs_compile)
    if best > REVIEW_SPEEDUP:
        out.append(f"speedup_review: {best:.1f}x is beyond {REVIEW_SPEEDUP:.0f}x; check the kernel does all the work")
    if floor_us is not None and candidate_us < 0.8 * floor_us:
        out.append(f"speedup_review: {candidate_us:.1f} us is below the memory roofline floor of {floor_us:.1f} us "
                   "for reading the inputs once")
    if wall_median_us is not None and wall_median_us > 1.5 * event_median_us + 50.0:
        out.append(f"speedup_review: each call takes {wall_median_us:.1f} us until the device is idle but the "
                   f"timed stream saw {event_median_us:.1f} us: is work running on another stream?")
    return out


def reference_problems(source: str, filename: str = "model.py") -> list[str]:
    """What a reference file lacks for the harness (class Model, get_inputs), read from its AST."""
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        return [f"{filename} line {exc.lineno}: {exc.msg}"]
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    problems = []
    if "Model" not in names:
        problems.append(f"{filename} defines no class Model")
    if "get_inputs" not in names:
        problems.append(f"{filename} defines no get_inputs()")
    return problems

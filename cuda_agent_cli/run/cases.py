"""Every shape the program uses: the session's best kernel verified and timed at each further call.

A session optimizes for its first call; a task may carry more (several `--inputs` specs, a spec
with a named dimension, the signatures `--capture` counted). When the session ends, the best
candidate is judged at each of them in a workspace of its own, exactly as at the first. Calls of
one family (a spec with named dimensions, at its range's ends and a middle size) stand or fall
together: the kernel is integrated for a family where it is correct at every call of it and not
slower than eager over them; elsewhere the original code keeps running.

The aggregate is the program's time in the class with the kernel over its time without, each
call weighted by how often the program makes it (its captured count; 1 each for --inputs specs):
sum(count x eager) / sum(count x time used), where the time used is the kernel's for calls of an
integrated family and eager's for the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from cuda_agent_cli.config import Policy
from cuda_agent_cli.harness_result import HarnessResult
from cuda_agent_cli.kernel_files import KernelFiles
from cuda_agent_cli.task.inputs import CallSpec
from cuda_agent_cli.task.target import Case, Task


@dataclass
class CaseOutcome:
    """One call the kernel was judged at."""

    call: CallSpec
    count: int | None
    result: HarnessResult | None  # None: it could not be judged here (see note)
    first: bool = False  # the call the session optimized for
    note: str = ""
    used: bool = False  # the kernel runs for this call once applied (its family was accepted)

    @property
    def family(self) -> str:
        return self.call.family()

    @property
    def weight(self) -> int:
        return self.count if self.count is not None else 1

    def to_json(self) -> dict[str, Any]:
        t = self.result.timings if self.result else None
        return {
            "inputs": self.call.describe(),
            "family": self.family,
            "count": self.count,
            "first": self.first,
            "correct": bool(self.result and self.result.correct),
            "reward": self.result.reward if self.result else None,
            "eager_us": t.eager_us if t else None,
            "compile_us": t.compile_us if t else None,
            "kernel_us": t.candidate_us if t else None,
            "speedup_vs_eager": t.speedup_vs_eager if t else None,
            "speedup_vs_compile": t.speedup_vs_compile if t else None,
            "used": self.used,
            "note": self.note,
        }


@dataclass
class ShapesVerdict:
    """The calls, which families run the kernel, and the aggregate."""

    cases: list[CaseOutcome]
    families: dict[str, bool] = field(default_factory=dict)  # family -> integrated
    reasons: dict[str, str] = field(default_factory=dict)  # family -> why not
    speedup_vs_eager: float | None = None  # weighted, as the program would see it
    speedup_vs_compile: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "cases": [c.to_json() for c in self.cases],
            "families": [
                {"family": f, "used": used, "why_not": self.reasons.get(f, "")} for f, used in self.families.items()
            ],
            "speedup_vs_eager": self.speedup_vs_eager,
            "speedup_vs_compile": self.speedup_vs_compile,
            "weighting": "time per call x captured count (1 each without counts)",
        }

    def summary(self) -> str:
        """The aggregate in words, with how it is weighted."""
        if self.speedup_vs_eager is None:
            return "over every shape: not all timed"
        weighted = "weighted by the captured calls" if any(c.count for c in self.cases) else "each shape once"
        line = f"over every shape ({weighted}, the original where the kernel does not run): "
        line += f"{self.speedup_vs_eager:.2f}x vs eager"
        if self.speedup_vs_compile is not None:
            line += f", {self.speedup_vs_compile:.2f}x vs torch.compile"
        return line

    def rows(self) -> list[tuple[str, str, str, str, str, str]]:
        """(call, calls, eager, kernel, vs eager, runs) per call, as text."""
        out = []
        for case in self.cases:
            t = case.result.timings if case.result else None
            runs = "kernel" if case.used else "original: " + (self.reasons.get(case.family) or "not verified")
            out.append(
                (
                    case.call.describe() + (" (optimized for)" if case.first else ""),
                    str(case.count) if case.count is not None else "-",
                    f"{t.eager_us:.1f} µs" if t else "-",
                    f"{t.candidate_us:.1f} µs" if t else "-",
                    f"{t.speedup_vs_eager:.2f}x" if t else "-",
                    runs,
                )
            )
        return out

    def used_calls(self) -> set[CallSpec]:
        return {c.call for c in self.cases if c.used}

    def manifest(self) -> dict[str, Any]:
        """What the manifest records: every call judged (a table each) and the weighted aggregate."""
        rows = []
        for c in self.cases:
            t = c.result.timings if c.result else None
            row = {
                "inputs": c.call.describe(),
                "family": c.family,
                "count": c.count,
                "correct": bool(c.result and c.result.correct),
                "used": c.used,
                "eager_us": t.eager_us if t else None,
                "kernel_us": t.candidate_us if t else None,
                "speedup_vs_eager": t.speedup_vs_eager if t else None,
            }
            rows.append({k: v for k, v in row.items() if v is not None})
        out: dict[str, Any] = {"shapes": rows}
        if self.speedup_vs_eager is not None:
            out["shapes_speedup_vs_eager"] = self.speedup_vs_eager
        if self.speedup_vs_compile is not None:
            out["shapes_speedup_vs_compile"] = self.speedup_vs_compile
        return out


def decide(cases: list[CaseOutcome]) -> ShapesVerdict:
    """Which families run the kernel, and the weighted aggregate (pure)."""
    verdict = ShapesVerdict(cases)
    by_family: dict[str, list[CaseOutcome]] = {}
    for c in cases:
        by_family.setdefault(c.family, []).append(c)
    for fam, members in by_family.items():
        why = ""
        wrong = [c for c in members if c.result is None or not c.result.correct]
        if wrong:
            c = wrong[0]
            why = c.note or ("not correct: " + _failed(c.result) if c.result else "not judged")
        else:
            eager = sum(c.weight * c.result.timings.eager_us for c in members if c.result and c.result.timings)
            kernel = sum(c.weight * c.result.timings.candidate_us for c in members if c.result and c.result.timings)
            if any(c.result is None or c.result.timings is None for c in members):
                why = "not timed"
            elif kernel > eager:
                why = f"slower than eager ({eager / kernel:.2f}x)"
        verdict.families[fam] = not why
        if why:
            verdict.reasons[fam] = why
        for c in members:
            c.used = not why
    verdict.speedup_vs_eager = _weighted(cases, "eager_us")
    verdict.speedup_vs_compile = _weighted(cases, "compile_us")
    return verdict


def _failed(result: HarnessResult | None) -> str:
    if result is None:
        return "not judged"
    failed = result.failed_checks()
    return failed[0].name if failed else "did not compile"


def _weighted(cases: list[CaseOutcome], baseline: str) -> float | None:
    """sum(count x baseline) / sum(count x time used); None where a call was not timed."""
    num = den = 0.0
    for c in cases:
        t = c.result.timings if c.result else None
        if t is None:
            return None
        base = getattr(t, baseline)
        if base is None or t.eager_us is None or t.candidate_us is None:
            return None
        num += c.weight * base
        den += c.weight * (t.candidate_us if c.used else t.eager_us)
    return num / den if den > 0 else None


def judge_more(
    task: Task,
    files: KernelFiles,
    *,
    device: str,
    policy: Policy,
    atol: float,
    rtol: float,
    trials: int | None,
    stage: Callable[[str], None],
    precision: str = "dtype",
) -> list[tuple[Case, HarnessResult | None, str]]:
    """Profile the candidate (its files) at each further call of
    the task, each in a workspace of its own; (case, result, note) in the task's order."""
    from dataclasses import replace

    from cuda_agent_cli.errors import CudaAgentError
    from cuda_agent_cli.harness import Harness
    from cuda_agent_cli.task.reference import reference_source
    from cuda_agent_cli.workspace import cache_dir, judging_workspace

    base = cache_dir() / "shapes"
    base.mkdir(parents=True, exist_ok=True)
    out: list[tuple[Case, HarnessResult | None, str]] = []
    for i, case in enumerate(task.more):
        stage(f"verifying and timing the kernel at shape {i + 2} of {len(task.more) + 1}: {case.call.describe()}")
        shaped = replace(task, call=case.call, parameters=case.parameters, output=case.output, more=())
        try:
            workspace = judging_workspace(base, reference_source(shaped), files, device, policy)
            # The harness's worker is shared within the process: another Harness costs nothing to start.
            harness = Harness(
                workspace, device=device, policy=policy, atol=atol, rtol=rtol, trials=trials, precision=precision
            )
            out.append((case, harness.profile(), ""))
        except CudaAgentError as exc:
            out.append((case, None, exc.one_line()))
    return out

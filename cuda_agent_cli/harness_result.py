"""HarnessResult (with its Check and Timings): the one object every compile, verify and profile
returns (docs/architecture.md, "Contracts").

It stands below the harness so that everything its result travels through (the agent's host
tools, the loop and its candidate records, the session runner, the review and the renderers)
reads it typed; its JSON object (`to_json`, `from_json`) is written and read only where it is the
contract: transcripts, chat.json, bench records, check's reports, the manifest, `--json` output.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "detail": self.detail}


@dataclass(frozen=True)
class Timings:
    eager_us: float
    compile_us: float
    candidate_us: float
    speedup_vs_eager: float
    speedup_vs_compile: float
    method: str
    trials: int
    # 95% intervals of the ratios (bootstrap over the rounds of the side-by-side window), and
    # whether one of them straddles a reward threshold.
    speedup_vs_eager_interval: tuple[float, float] | None = None
    speedup_vs_compile_interval: tuple[float, float] | None = None
    uncertain: bool = False
    # Every baseline timed (eager, compile, autotune, graphs): {"us", "speedup", "interval"},
    # and the fastest of them with the speedup against it.
    baselines: dict[str, dict[str, Any]] = field(default_factory=dict)
    best_baseline: str | None = None
    speedup_vs_best: float | None = None
    speedup_vs_best_interval: tuple[float, float] | None = None
    # The speed-of-light time and each side's fraction of it (harness/roofline.py), and the
    # candidate's fraction on its own.
    roofline: dict[str, Any] | None = None
    fraction_of_peak: float | None = None
    reward_baseline: str = "paper"  # what the reward was decided against: "paper" or "best"

    def to_json(self) -> dict[str, Any]:
        def interval(iv: tuple[float, float] | None, point: float) -> list[float]:
            lo, hi = iv if iv is not None else (point, point)
            return [round(lo, 4), round(hi, 4)]

        best = {}
        if self.best_baseline is not None and self.speedup_vs_best is not None:
            best = {
                "best_baseline": self.best_baseline,
                "speedup_vs_best": round(self.speedup_vs_best, 4),
                "speedup_vs_best_interval": interval(self.speedup_vs_best_interval, self.speedup_vs_best),
            }
        extra: dict[str, Any] = {"reward_baseline": self.reward_baseline}
        if self.baselines:
            extra["baselines"] = self.baselines
        if self.roofline is not None:
            extra["roofline"] = self.roofline
            extra["fraction_of_peak"] = self.fraction_of_peak
        return {
            "eager_us": round(self.eager_us, 3),
            "compile_us": round(self.compile_us, 3),
            "candidate_us": round(self.candidate_us, 3),
            "speedup_vs_eager": round(self.speedup_vs_eager, 4),
            "speedup_vs_compile": round(self.speedup_vs_compile, 4),
            "method": self.method,
            "trials": self.trials,
            "speedup_vs_eager_interval": interval(self.speedup_vs_eager_interval, self.speedup_vs_eager),
            "speedup_vs_compile_interval": interval(self.speedup_vs_compile_interval, self.speedup_vs_compile),
            "uncertain": self.uncertain,
            **best,
            **extra,
        }

    def against_best(self) -> str:
        """One line: the speedup against the best baseline timed, and how close to the
        hardware's speed of light ('' where neither was measured)."""
        parts = []
        if self.best_baseline and self.speedup_vs_best is not None:
            lo, hi = self.speedup_vs_best_interval or (self.speedup_vs_best, self.speedup_vs_best)
            parts.append(
                f"vs the best baseline ({self.best_baseline}): {self.speedup_vs_best:.2f}x ({lo:.2f}-{hi:.2f})"
            )
        if self.roofline and self.fraction_of_peak is not None:
            parts.append(
                f"{self.fraction_of_peak:.1%} of the speed-of-light time ({self.roofline['sol_us']:.2f} µs, "
                f"{self.roofline['bound']}-bound)"
            )
        return "; ".join(parts)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Timings":
        def interval(key: str) -> tuple[float, float] | None:
            value = data.get(key)
            return (float(value[0]), float(value[1])) if isinstance(value, (list, tuple)) and len(value) == 2 else None

        return cls(
            float(data["eager_us"]),
            float(data["compile_us"]),
            float(data["candidate_us"]),
            float(data["speedup_vs_eager"]),
            float(data["speedup_vs_compile"]),
            str(data.get("method", "")),
            int(data.get("trials", 0)),
            interval("speedup_vs_eager_interval"),
            interval("speedup_vs_compile_interval"),
            bool(data.get("uncertain", False)),
            baselines=dict(data.get("baselines") or {}),
            best_baseline=data.get("best_baseline"),
            speedup_vs_best=float(data["speedup_vs_best"]) if data.get("speedup_vs_best") is not None else None,
            speedup_vs_best_interval=interval("speedup_vs_best_interval"),
            roofline=data.get("roofline") if isinstance(data.get("roofline"), dict) else None,
            fraction_of_peak=float(data["fraction_of_peak"]) if data.get("fraction_of_peak") is not None else None,
            reward_baseline=str(data.get("reward_baseline") or "paper"),
        )


@dataclass
class HarnessResult:
    compiled: bool
    correct: bool
    reward: int | None
    device: str
    policy: str
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    timings: Timings | None = None
    environment: dict[str, Any] = field(default_factory=lambda: {"gpu": None, "torch": "", "cuda": None})
    # What the outputs were held to ("float32": the module's own dtype; "tf32", "fp16", "bf16" or
    # "kernelbench" where the user chose a looser rule), None where nothing was judged.
    precision: str | None = None
    # Why a profile could not be measured (another program on the device, say): a fault that is
    # not the candidate's, so the reward is null, never -1.
    not_measured: str | None = None
    # Not part of the JSON object: where the full compiler log is and how long each stage took.
    compile_log: str | None = None
    stage_seconds: dict[str, float] = field(default_factory=dict)
    # Inside the candidate and judge jobs, as they reported it ("candidate.timing": seconds).
    phase_seconds: dict[str, float] = field(default_factory=dict)
    # Where the timed calls' time went, per side (harness/clock_stats.py side_by_side's detail).
    timing_detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Exactly the harness result object of docs/architecture.md."""
        return {
            "compiled": self.compiled,
            "correct": self.correct,
            "reward": self.reward,
            "device": self.device,
            "policy": self.policy,
            "errors": list(self.errors),
            "warnings": list(self.warnings),
            "checks": [c.to_json() for c in self.checks],
            "timings": self.timings.to_json() if self.timings else None,
            "environment": {k: self.environment.get(k) for k in ("gpu", "torch", "cuda")},
            "precision": self.precision,
            "not_measured": self.not_measured,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "HarnessResult":
        """The inverse of to_json (transcripts, bench results, the manifest keep this object)."""
        timings = data.get("timings")
        return cls(
            compiled=bool(data.get("compiled")),
            correct=bool(data.get("correct")),
            reward=data.get("reward"),
            device=str(data.get("device", "")),
            policy=str(data.get("policy", "")),
            errors=list(data.get("errors") or []),
            warnings=list(data.get("warnings") or []),
            checks=[
                Check(str(c["name"]), bool(c["passed"]), str(c.get("detail", ""))) for c in data.get("checks") or []
            ],
            timings=Timings.from_json(timings) if isinstance(timings, dict) else None,
            environment=dict(data.get("environment") or {}),
            precision=data.get("precision") if isinstance(data.get("precision"), str) else None,
            not_measured=data.get("not_measured") if isinstance(data.get("not_measured"), str) else None,
        )

    def as_recorded(self) -> HarnessResult:
        """This result as its JSON object records it: numbers rounded as `to_json` rounds them,
        an interval that was not measured as its point, and none of the fields the object leaves
        out (the compiler log, the stage and phase seconds, the timing detail). A result judged
        in this run is handed on in this form, so it ranks and reads exactly as the same result
        read back from a transcript does."""
        return HarnessResult.from_json(self.to_json())

    def failed_checks(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    def check(self, name: str) -> Check | None:
        return next((c for c in self.checks if c.name == name), None)

    def summary(self) -> str:
        """A short text for a model: verdict, what failed and why, compiler errors, timings."""
        verdict = "correct" if self.correct else ("compile failed" if not self.compiled else "not correct")
        reward = "n/a" if self.reward is None else str(self.reward)
        held = f", verified at {self.precision}" if self.precision else ""
        lines = [f"reward {reward}: {verdict} (device {self.device}, policy {self.policy}{held})"]
        if self.not_measured:
            lines.append(f"NOT MEASURED: {self.not_measured}; profile again when the device is free")
        for c in self.failed_checks():
            detail = c.detail if c.name != "compile" else c.detail.replace("\n", "\n    ")
            lines.append(f"FAILED {c.name}: {detail}")
        for e in self.errors:
            if not any(e in c.detail for c in self.failed_checks()):
                lines.append(f"error: {e}")
        for w in self.warnings:
            lines.append(f"warning: {w}")
        if self.timings:
            t = self.timings
            ev = t.speedup_vs_eager_interval or (t.speedup_vs_eager, t.speedup_vs_eager)
            cv = t.speedup_vs_compile_interval or (t.speedup_vs_compile, t.speedup_vs_compile)
            lines.append(
                f"candidate {t.candidate_us:.1f} us | eager {t.eager_us:.1f} us ({t.speedup_vs_eager:.2f}x, "
                f"{ev[0]:.2f}-{ev[1]:.2f}) | torch.compile {t.compile_us:.1f} us ({t.speedup_vs_compile:.2f}x, "
                f"{cv[0]:.2f}-{cv[1]:.2f}){' | uncertain' if t.uncertain else ''} | {t.method}"
            )
            extra = [
                f"{name} {row['us']:.1f} us ({row['speedup']:.2f}x)"
                for name, row in t.baselines.items()
                if name not in ("eager", "compile") and isinstance(row, dict) and "us" in row
            ]
            if t.best_baseline and t.speedup_vs_best is not None:
                extra.append(f"vs best ({t.best_baseline}) {t.speedup_vs_best:.2f}x")
            if t.fraction_of_peak is not None and t.roofline:
                extra.append(
                    f"{t.fraction_of_peak:.1%} of the speed-of-light time ({t.roofline['sol_us']:.2f} us, "
                    f"{t.roofline['bound']}-bound)"
                )
            if extra:
                lines.append(" | ".join(extra))
        if self.stage_seconds:
            lines.append("stages: " + ", ".join(f"{k} {v:.1f}s" for k, v in self.stage_seconds.items()))
        return "\n".join(lines)

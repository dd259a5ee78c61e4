"""HarnessResult: the one object every compile/verify/profile returns (DESIGN §3)."""

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

    def to_json(self) -> dict[str, Any]:
        return {
            "eager_us": round(self.eager_us, 3),
            "compile_us": round(self.compile_us, 3),
            "candidate_us": round(self.candidate_us, 3),
            "speedup_vs_eager": round(self.speedup_vs_eager, 4),
            "speedup_vs_compile": round(self.speedup_vs_compile, 4),
            "method": self.method,
            "trials": self.trials,
        }


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
    # Not part of the JSON object: where the full compiler log is and how long each stage took.
    compile_log: str | None = None
    stage_seconds: dict[str, float] = field(default_factory=dict)
    # Inside the candidate and judge jobs, as they reported it ("candidate.timing": seconds).
    phase_seconds: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Exactly the DESIGN §3 object."""
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
        }

    def failed_checks(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]

    def check(self, name: str) -> Check | None:
        return next((c for c in self.checks if c.name == name), None)

    def summary(self) -> str:
        """A short text for a model: verdict, what failed and why, compiler errors, timings."""
        verdict = "correct" if self.correct else ("compile failed" if not self.compiled else "not correct")
        reward = "n/a" if self.reward is None else str(self.reward)
        lines = [f"reward {reward}: {verdict} (device {self.device}, policy {self.policy})"]
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
            lines.append(
                f"candidate {t.candidate_us:.1f} us | eager {t.eager_us:.1f} us ({t.speedup_vs_eager:.2f}x) | "
                f"torch.compile {t.compile_us:.1f} us ({t.speedup_vs_compile:.2f}x) | {t.method}"
            )
        if self.stage_seconds:
            lines.append("stages: " + ", ".join(f"{k} {v:.1f}s" for k, v in self.stage_seconds.items()))
        return "\n".join(lines)

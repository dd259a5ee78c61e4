"""The kernel ledger: every candidate the harness judged in this chat, and which one is best.

Built from harness results only (HarnessResultEvent or a session's recorded results), so the
numbers are the harness's, never the model's. Pure: the panel renders `rows()`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cuda_agent_cli.agent.session import candidate_score
from cuda_agent_cli.harness.result import HarnessResult, Timings


@dataclass
class Candidate:
    number: int
    session_id: str
    tool: str
    turn: int
    result: dict[str, Any]  # the harness result's JSON object, as chat.json keeps it
    at: int | None = None  # events in the chat's transcript when it was judged: where its card goes
    reverted: bool = False  # its session's kernel was applied and then undone: no longer a best

    def __post_init__(self) -> None:
        self.harness = HarnessResult.from_json(self.result)

    @property
    def compiled(self) -> bool:
        return self.harness.compiled

    @property
    def correct(self) -> bool:
        return self.harness.correct

    @property
    def reward(self) -> int | None:
        return self.harness.reward

    @property
    def timings(self) -> Timings | None:
        return self.harness.timings

    def failed_checks(self) -> list[str]:
        return [c.name for c in self.harness.failed_checks()]


def fmt_speedup(timings: Timings | None, which: str) -> str:
    """`1.42x [1.38-1.47]`, or '-' when not timed."""
    if timings is None:
        return "-"
    value, interval = (
        (timings.speedup_vs_eager, timings.speedup_vs_eager_interval)
        if which == "eager"
        else (timings.speedup_vs_compile, timings.speedup_vs_compile_interval)
    )
    if interval is not None:
        return f"{value:.2f}x [{interval[0]:.2f}-{interval[1]:.2f}]"
    return f"{value:.2f}x"


@dataclass
class Ledger:
    candidates: list[Candidate] = field(default_factory=list)

    def add(self, session_id: str, tool: str, turn: int, result: dict[str, Any], at: int | None = None) -> Candidate:
        cand = Candidate(len(self.candidates) + 1, session_id, tool, turn, dict(result), at)
        self.candidates.append(cand)
        return cand

    def best(self, upto: int | None = None, with_reverted: bool = False) -> Candidate | None:
        """The best measured candidate (of the first `upto`): reward, then speedup vs torch.compile,
        then vs eager; one whose kernel was applied and undone counts only `with_reverted`."""
        scored = [
            (candidate_score(c.result), -c.number, c) for c in self.candidates[:upto] if with_reverted or not c.reverted
        ]
        scored = [s for s in scored if s[0] is not None]
        return max(scored, key=lambda s: (s[0], s[1]))[2] if scored else None

    def was_best(self, cand: Candidate) -> bool:
        """Whether `cand` was the best when it was judged (what its card said then)."""
        return self.best(cand.number, with_reverted=True) is cand

    def mark_reverted(self, session_id: str) -> int:
        """The kernel of `session_id` was undone: its candidates stop counting as the best; how many."""
        n = 0
        for c in self.candidates:
            if c.session_id == session_id and not c.reverted:
                c.reverted = True
                n += 1
        return n

    def best_verified_speedup(self) -> str:
        best = self.best()
        if best is None:
            return "-"
        t = best.timings
        if t is not None:
            return f"{t.speedup_vs_eager:.2f}x eager, {t.speedup_vs_compile:.2f}x compile"
        return "correct, untimed"

    def rows(self) -> list[tuple[str, ...]]:
        best = self.best()
        out: list[tuple[str, ...]] = []
        for c in self.candidates:
            mark = "★" if c is best else ("↶" if c.reverted else "")
            out.append(
                (
                    f"{mark}{c.number}",
                    c.tool,
                    "yes" if c.compiled else "no",
                    "yes" if c.correct else ("-" if not c.compiled or c.tool == "Compile" else "no"),
                    str(c.reward) if c.reward is not None else "-",
                    fmt_speedup(c.timings, "eager"),
                    fmt_speedup(c.timings, "compile"),
                    ", ".join(c.failed_checks()) or "-",
                )
            )
        return out


LEDGER_COLUMNS = ("#", "tool", "compiled", "correct", "reward", "vs eager", "vs compile", "failed checks")

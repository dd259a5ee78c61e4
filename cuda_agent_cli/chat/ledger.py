"""The kernel ledger: every candidate the harness judged in this chat, and which one is best.

A candidate is one kernel: a distinct set of sources (model_new.py and kernels/*) of one session,
however many times Compile, Verify or Profile judged it; each of those results is a card in the
conversation. Built from harness results only (HarnessResultEvent or a session's recorded
results), so the numbers are the harness's, never the model's. Pure: the panel renders `rows()`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cuda_agent_cli.agent.session_store import candidate_score
from cuda_agent_cli.harness_result import HarnessResult, Timings


@dataclass
class Judged:
    """One harness result: a card where it was judged, a row of chat.json."""

    index: int  # its place among the ledger's results, from 1
    session_id: str
    tool: str
    turn: int
    result: HarnessResult  # chat.json keeps its JSON object
    at: int | None = None  # events in the chat's transcript when it was judged: where its card goes
    reverted: bool = False  # its session's kernel was applied and then undone: no longer a best
    sources: str | None = None  # workspace.candidate_digest of what it judged (None: recorded without)
    candidate: int = 0  # the number of the candidate (kernel) it judged

    @property
    def compiled(self) -> bool:
        return self.result.compiled

    @property
    def correct(self) -> bool:
        return self.result.correct

    @property
    def reward(self) -> int | None:
        return self.result.reward

    @property
    def timings(self) -> Timings | None:
        return self.result.timings

    def failed_checks(self) -> list[str]:
        return [c.name for c in self.result.failed_checks()]


@dataclass
class Candidate:
    """One kernel and every result the harness gave it, in order."""

    number: int
    session_id: str
    sources: str | None
    judged: list[Judged] = field(default_factory=list)

    @property
    def shown(self) -> Judged:
        """The result the ledger shows for it: its best measured one, else its latest."""
        scored = [(s, j.index, j) for j in self.judged if (s := candidate_score(j.result)) is not None]
        return max(scored, key=lambda t: (t[0], t[1]))[2] if scored else self.judged[-1]

    @property
    def reverted(self) -> bool:
        return all(j.reverted for j in self.judged)


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
    judged: list[Judged] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)

    def add(
        self,
        session_id: str,
        tool: str,
        turn: int,
        result: HarnessResult,
        at: int | None = None,
        sources: str | None = None,
    ) -> Judged:
        """One harness result; it joins the candidate of the same session with the same sources,
        or starts the next one (a result recorded without its sources always does)."""
        cand = next(
            (c for c in self.candidates if sources is not None and (c.session_id, c.sources) == (session_id, sources)),
            None,
        )
        if cand is None:
            cand = Candidate(len(self.candidates) + 1, session_id, sources)
            self.candidates.append(cand)
        judged = Judged(len(self.judged) + 1, session_id, tool, turn, result, at, sources=sources)
        judged.candidate = cand.number
        cand.judged.append(judged)
        self.judged.append(judged)
        return judged

    def best(self, upto: int | None = None, with_reverted: bool = False) -> Judged | None:
        """The best measured result (of the first `upto`): reward, then speedup vs torch.compile,
        then vs eager, the earliest of equals; one whose kernel was applied and undone counts
        only `with_reverted`."""
        scored = [
            (candidate_score(j.result), -j.index, j) for j in self.judged[:upto] if with_reverted or not j.reverted
        ]
        scored = [s for s in scored if s[0] is not None]
        return max(scored, key=lambda s: (s[0], s[1]))[2] if scored else None

    def was_best(self, judged: Judged) -> bool:
        """Whether `judged` was the best when it was judged (what its card said then)."""
        return self.best(judged.index, with_reverted=True) is judged

    def mark_reverted(self, session_id: str) -> int:
        """The kernel of `session_id` was undone: its results stop counting as the best; how many."""
        n = 0
        for j in self.judged:
            if j.session_id == session_id and not j.reverted:
                j.reverted = True
                n += 1
        return n

    def counted(self) -> str:
        """ "2 candidates", "1 candidate": the kernels in the ledger, for a line that says so."""
        n = len(self.candidates)
        return f"{n} candidate" + ("" if n == 1 else "s")

    def best_verified_speedup(self) -> str:
        best = self.best()
        if best is None:
            return "-"
        t = best.timings
        if t is not None:
            return f"{t.speedup_vs_eager:.2f}x eager, {t.speedup_vs_compile:.2f}x compile"
        return "correct, untimed"

    def rows(self) -> list[tuple[str, ...]]:
        """One row per candidate, with its shown result."""
        best = self.best()
        out: list[tuple[str, ...]] = []
        for c in self.candidates:
            j = c.shown
            mark = "★" if best is not None and best.candidate == c.number else ("↶" if c.reverted else "")
            out.append(
                (
                    f"{mark}{c.number}",
                    j.tool,
                    "yes" if j.compiled else "no",
                    "yes" if j.correct else ("-" if not j.compiled or j.tool == "Compile" else "no"),
                    str(j.reward) if j.reward is not None else "-",
                    fmt_speedup(j.timings, "eager"),
                    fmt_speedup(j.timings, "compile"),
                    ", ".join(j.failed_checks()) or "-",
                )
            )
        return out


LEDGER_COLUMNS = ("#", "tool", "compiled", "correct", "reward", "vs eager", "vs compile", "failed checks")

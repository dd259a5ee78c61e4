"""The paper's reward for a correct, timed kernel, decided on its speedups' intervals."""

from __future__ import annotations

MARGIN = 0.05  # "faster" means more than 5% faster (the paper's rule)


def reward_for_intervals(eager: tuple[float, float] | None, compile_: tuple[float, float] | None) -> int:
    """The paper's reward for a correct, timed kernel, decided on the ratios' intervals: 3 needs
    the whole interval above 1.05 against both baselines, 2 against eager; else 1."""
    faster_eager = eager is not None and eager[0] > 1 + MARGIN
    faster_compile = compile_ is not None and compile_[0] > 1 + MARGIN
    if faster_eager and faster_compile:
        return 3
    if faster_eager:
        return 2
    return 1


def reward_in_words(reward: int | None) -> str:
    """One line that says what a reward means."""
    return {
        3: "faster than both eager and torch.compile by more than 5%",
        2: "faster than eager by more than 5%, not than torch.compile",
        1: "correct, but not more than 5% faster than eager",
        -1: "did not compile or was not correct",
    }.get(reward if reward is not None else 0, "correct (not timed)")


def uncertain(*intervals: tuple[float, float] | None) -> bool:
    """Whether an interval straddles the reward threshold (1.05): the reward may be off by one."""
    return any(iv is not None and iv[0] <= 1 + MARGIN < iv[1] for iv in intervals)

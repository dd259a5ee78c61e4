"""The bench's metrics against values worked out by hand (docs/bench.md has the definitions)."""

import math

import pytest

from cuda_agent_cli.bench import metrics as m


def rec(level, correct, se=None, sc=None, reward=None, **extra):
    return {
        "task": f"t{level}{se}{sc}",
        "level": level,
        "correct": correct,
        "speedup_vs_eager": se,
        "speedup_vs_compile": sc,
        "reward": reward if reward is not None else (-1 if not correct else 1),
        "status": "correct" if correct else "failed",
        **extra,
    }


# A: 2x eager, 1.5x compile; B: as fast as eager, half compile's speed; C failed; D: 4x eager, 8x compile.
RECORDS = [
    rec(1, True, 2.0, 1.5, 3, wall_s=1.0, cost_usd=0.5, n_samples=2, n_correct=1),
    rec(1, True, 1.0, 0.5, 1, wall_s=2.0, cost_usd=0.25),
    rec(2, False, wall_s=6.0),
    rec(2, True, 4.0, 8.0, 3, wall_s=3.0),
]


def test_shares_count_every_task_in_the_denominator():
    assert m.pass_rate(RECORDS) == 0.75
    assert m.faster_than(RECORDS, "eager") == 0.5  # A and D; B is not faster
    assert m.faster_than(RECORDS, "compile") == 0.5  # A (1.5) and D (8)
    assert m.pass_rate([]) is None


def test_faster_means_more_than_five_percent():
    assert m.faster_than([rec(1, True, 1.05, 1.0)], "eager") == 0.0
    assert m.faster_than([rec(1, True, 1.06, 1.0)], "eager") == 1.0
    # A wrong kernel's speedup never counts, however large.
    assert m.faster_than([rec(1, False, 9.0, 9.0)], "eager") == 0.0


def test_fast_p_is_strictly_greater_and_fast_0_is_the_pass_rate():
    assert [m.fast_p(RECORDS, p, "eager") for p in m.FAST_P] == [0.75, 0.5, 0.5, 0.25]
    assert [m.fast_p(RECORDS, p, "compile") for p in m.FAST_P] == [0.75, 0.5, 0.25, 0.25]


def test_geomeans_correct_only_and_with_failures_as_one():
    assert m.geomean(m.speedup_values(RECORDS, "eager", False)) == pytest.approx(2.0)  # (2*1*4)^(1/3)
    assert m.geomean(m.speedup_values(RECORDS, "eager", True)) == pytest.approx(2**0.75)  # (2*1*4*1)^(1/4)
    assert m.geomean(m.speedup_values(RECORDS, "compile", False)) == pytest.approx(6 ** (1 / 3))
    assert m.geomean(m.speedup_values(RECORDS, "compile", True)) == pytest.approx(6**0.25)
    # Against the faster baseline: min(2, 1.5), min(1, 0.5), min(4, 8) = 1.5, 0.5, 4.
    assert m.geomean(m.speedup_values(RECORDS, "best", False)) == pytest.approx(3 ** (1 / 3))
    assert m.geomean([]) is None


def test_bootstrap_interval_is_deterministic_and_brackets_the_estimate():
    assert m.bootstrap_ci([2.0]) == (2.0, 2.0)
    assert m.bootstrap_ci([]) is None
    # Resamples of two values: both low, one of each, or both high -> 1, 2 or 4.
    assert m.bootstrap_ci([1.0, 4.0]) == (1.0, 4.0)
    values = [0.8, 1.2, 1.9, 2.5, 3.1, 0.9, 1.4]
    lo, hi = m.bootstrap_ci(values)
    assert m.bootstrap_ci(values) == (lo, hi)
    assert lo < m.geomean(values) < hi
    assert m.bootstrap_ci(values, seed=1) != (lo, hi)


def test_pass_at_k():
    assert m.pass_at_k(2, 1, 1) == 0.5
    assert m.pass_at_k(2, 1, 2) == 1.0
    assert m.pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 1 - C(3,2)/C(5,2)
    assert m.pass_at_k(3, 0, 1) == 0.0
    assert m.pass_at_k(3, 3, 2) == 1.0
    assert m.pass_at_k(1, 1, 4) == 1.0  # k beyond n means every sample
    assert m.pass_at_k(0, 0, 1) == 0.0  # no candidate at all


def test_rewards_costs_and_times():
    assert m.reward_distribution(RECORDS) == {"-1": 1, "1": 1, "2": 0, "3": 2, "none": 0}
    assert m.spread(r.get("wall_s") for r in RECORDS) == {"total": 12.0, "mean": 3.0, "median": 2.5, "max": 6.0}
    assert m.spread(r.get("cost_usd") for r in RECORDS)["total"] == 0.75
    assert m.spread([None]) is None


def test_summary_per_level_and_overall():
    s = m.summarize(RECORDS + [{**rec(2, False), "warnings": ["speedup 40x vs eager: review"]}])
    assert set(s["levels"]) == {"level1", "level2"}
    assert s["levels"]["level1"]["pass_rate"] == 1.0
    assert s["levels"]["level2"]["pass_rate"] == pytest.approx(1 / 3)
    o = s["overall"]
    assert (o["tasks"], o["correct"]) == (5, 3)
    assert o["geomean"]["eager"]["failures_as_one"]["value"] == pytest.approx(8**0.2)
    lo, hi = o["geomean"]["eager"]["failures_as_one"]["ci95"]
    assert lo <= 8**0.2 <= hi
    # pass@k: k = 1 and the largest sample count (2); the task with 2 samples has 1 correct.
    assert o["pass_at_k"]["1"] == pytest.approx((0.5 + 1 + 0 + 1 + 0) / 5)
    assert o["pass_at_k"]["2"] == pytest.approx((1 + 1 + 0 + 1 + 0) / 5)
    assert s["warnings"] == [{"task": "t2NoneNone", "warning": "speedup 40x vs eager: review"}]
    assert s["paper"] == {"pass_rate": 0.988, "faster_than_compile": 0.968, "geomean_vs_compile": 2.11}
    assert math.isclose(o["fast_p"]["eager"]["2"], 1 / 5)

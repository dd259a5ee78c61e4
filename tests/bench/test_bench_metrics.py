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


def _line(flops, nbytes, fractions, peak=1e12, bandwidth=1e11):
    sol = max(flops / peak, nbytes / bandwidth) * 1e6
    return {
        "sol_us": sol,
        "flops": flops,
        "bytes": nbytes,
        "bound": "compute" if flops / peak > nbytes / bandwidth else "memory",
        "peak_flops": peak,
        "bandwidth": bandwidth,
        "peak_source": "measured",
        "fractions": fractions,
    }


def test_the_best_baseline_is_every_baseline_timed_and_fraction_of_peak_is_summarized():
    records = [
        # max-autotune was faster than default compile: the best baseline is it.
        rec(
            1,
            True,
            2.0,
            1.5,
            3,
            speedup_vs_best=0.9,
            best_baseline="autotune",
            fraction_of_peak=0.4,
            baselines={"eager": {}, "compile": {}, "autotune": {}},
        ),
        rec(
            1,
            True,
            3.0,
            2.0,
            3,
            speedup_vs_best=2.0,
            best_baseline="compile",
            fraction_of_peak=0.8,
            baselines={"eager": {}, "compile": {}, "autotune": {}, "graphs": {}},
        ),
        # An older record without the field: the faster of eager and compile.
        rec(1, True, 1.2, 1.1, 2),
        rec(1, False, fraction_of_peak=0.99),  # a failed task's fraction is not counted
    ]
    assert [m.speedup(r, "best") for r in records] == [0.9, 2.0, 1.1, None]
    o = m.summarize(records)["overall"]
    assert o["faster_than_best"] == pytest.approx(2 / 4)
    assert o["fraction_of_peak"]["median"] == pytest.approx(0.6)
    assert m.baselines_timed(records) == ["eager", "compile", "autotune", "graphs"]


def test_the_report_carries_best_baseline_fraction_of_peak_definitions_and_a_roofline():
    pytest.importorskip("matplotlib")
    from cuda_agent_cli.bench import report

    records = [
        rec(
            1,
            True,
            2.0,
            1.5,
            3,
            speedup_vs_best=0.9,
            best_baseline="autotune",
            fraction_of_peak=0.25,
            roofline=_line(1e9, 1e7, {"candidate": 0.25, "compile": 0.2, "autotune": 0.3}),
        ),
        rec(
            1,
            True,
            3.0,
            2.0,
            3,
            speedup_vs_best=2.0,
            best_baseline="compile",
            fraction_of_peak=0.5,
            roofline=_line(1e6, 1e8, {"candidate": 0.5, "compile": 0.25}),
        ),
        rec(1, True, 1.5, 1.2, 2, roofline=_line(0, 1e6, {"candidate": 0.9})),  # no FLOPs: not on the plot
    ]
    summary = m.summarize(records)
    summary.update(baselines=["eager", "compile", "autotune"], settings={"policy": "strict", "reward_baseline": "best"})
    md = report.render_markdown(summary, records)
    assert "vs best" in md and "best baseline" in md and "of peak" in md
    assert "| t12.01.5 | correct | 3 | 2.00x | 1.50x | 0.90x | autotune | 25.0% |" in md
    assert "torch.compile max-autotune without CUDA graphs" in md
    assert "the best baseline (--reward-baseline best)" in md and "failures as 1.0" in md
    assert len(report.roofline_points(records, "candidate")) == 2
    # Achieved FLOP/s = flops / (sol / fraction): the first task, 1e9 FLOP at 1 ms / 0.25.
    intensity, achieved = report.roofline_points(records, "candidate")[0]
    assert intensity == pytest.approx(100.0) and achieved == pytest.approx(1e9 / 0.004)
    assert "roofline" in report.plots(summary, records)
    assert "<h2>Definitions</h2>" in report.render_html(summary, records)


def test_a_suite_without_flops_gets_its_memory_roofline():
    pytest.importorskip("matplotlib")
    from cuda_agent_cli.bench import report

    records = [rec(1, True, 1.5, 1.2, 2, roofline=_line(0, 1e6, {"candidate": 0.9, "compile": 0.5}))]
    assert report.roofline_points(records, "candidate") == []
    assert "roofline" in report.plots(m.summarize(records), records)
    # No task measured on the roofline: no plot.
    assert "roofline" not in report.plots(m.summarize([rec(1, True, 1.5, 1.2, 2)]), [rec(1, True, 1.5, 1.2, 2)])

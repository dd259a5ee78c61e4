"""The device-busy fraction of a run, from the spans its records carry (worked out by hand)."""

import pytest

from cuda_agent_cli.bench.timeline import busy_fraction, union_seconds


def test_overlapping_spans_count_once():
    assert union_seconds([[0, 2], [1, 3], [5, 6], [5.5, 5.7], [7, 7]]) == pytest.approx(4.0)
    assert union_seconds([]) == 0.0


def test_busy_fraction_per_gpu_and_overall():
    records = [
        {"gpu": "0", "held": [100, 104], "device_busy": [[101, 104]]},
        {"gpu": "0", "held": [104, 110], "device_busy": [[105, 107], [108, 110]]},
        {"gpu": "1", "held": [100, 105], "device_busy": [[100, 105]]},
        {"gpu": None, "held": [100, 101], "device_busy": []},  # a task error: no round
    ]
    got = busy_fraction(records)
    # The run spans 100..110: GPU 0 is busy 3 + 2 + 2 = 7 s of 10, GPU 1 5 s of 10.
    assert got["wall_s"] == 10
    assert got["devices"] == {"0": 0.7, "1": 0.5, "cpu": 0.0}
    assert got["overall"] == pytest.approx(12 / 30, abs=1e-4)
    # Within a window given by the caller, spans are clipped to it.
    assert busy_fraction(records[:1], start=102, end=104)["devices"] == {"0": 1.0}

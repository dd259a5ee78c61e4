"""A device another program keeps busy is never the kernel's failure (threat 45): the round is
not measured, its reward null, `profile` exits 3; where the busy work was the candidate's own,
`device_contention` fails as before."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import typer

from cuda_agent_cli import machine
from cuda_agent_cli.harness import driver, verdict
from cuda_agent_cli.harness_result import Check, HarnessResult

BUSY = {"stage": "time", "device_contention": True, "error": "the device stayed slow in 4 tries"}


def _result(**kw) -> HarnessResult:
    base = dict(compiled=True, correct=False, reward=-1, device="cuda", policy="strict")
    return HarnessResult(**{**base, **kw})


def test_contention_is_not_a_failed_check_and_its_reward_is_null():
    result = _result()
    verdict.evaluation_checks(result, BUSY, "", False, 300)
    assert result.failed_checks() == [] and result.not_measured == BUSY["error"]
    verdict.finish(result)
    assert result.reward is None and not result.correct
    payload = result.to_json()
    assert payload["not_measured"] == BUSY["error"] and payload["reward"] is None
    assert "NOT MEASURED" in result.summary()


def _harness(rounds: list[HarnessResult]) -> SimpleNamespace:
    def evaluate(timed: bool) -> HarnessResult:
        return rounds.pop(0)

    return SimpleNamespace(_evaluate=evaluate)


def test_busy_elsewhere_twice_is_verified_and_marked_not_measured(monkeypatch):
    monkeypatch.setattr(driver, "gpu_busy_elsewhere", lambda: True)
    busy = _result(not_measured="slow")
    judged = _result(correct=True, reward=None, checks=[Check("correctness", True, "ok")])
    got = driver.Harness._measure_again(_harness([_result(not_measured="slow again"), judged]), busy)  # type: ignore[arg-type]
    assert got.correct and got.reward is None and got.not_measured == "slow again"
    assert any("not_measured" in w for w in got.warnings)


def test_busy_elsewhere_once_is_simply_measured_again(monkeypatch):
    monkeypatch.setattr(driver, "gpu_busy_elsewhere", lambda: True)
    timed = _result(correct=True, reward=3)
    got = driver.Harness._measure_again(_harness([timed]), _result(not_measured="slow"))  # type: ignore[arg-type]
    assert got is timed and got.not_measured is None


def test_a_device_quiet_once_the_round_is_gone_was_busy_with_the_candidates_own_work(monkeypatch):
    monkeypatch.setattr(driver, "gpu_busy_elsewhere", lambda: False)
    got = driver.Harness._measure_again(_harness([]), _result(not_measured="slow"))  # type: ignore[arg-type]
    assert got.reward == -1 and got.not_measured is None
    assert [c.name for c in got.failed_checks()] == ["device_contention"]


def test_profile_exits_3_when_not_measured(capsys):
    from cuda_agent_cli.cli.harness import _report

    result = _result(correct=True, reward=None, not_measured="another program kept the GPU busy")
    with pytest.raises(typer.Exit) as stop:
        _report([result], True, "profile")
    assert stop.value.exit_code == 3
    assert json.loads(capsys.readouterr().out)["not_measured"]


def _fake_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lines: str) -> None:
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\nprintf '{lines}'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_the_gpu_is_read_busy_from_nvidia_smi(tmp_path, monkeypatch):
    _fake_smi(tmp_path, monkeypatch, "0, 97 %%\\n1, 0 %%\\n")
    assert machine.gpu_busy_elsewhere(readings=2, pause_s=0) is True
    _fake_smi(tmp_path, monkeypatch, "0, 3 %%\\n1, 0 %%\\n")
    assert machine.gpu_busy_elsewhere(readings=2, pause_s=0) is False
    # Only the GPUs this process may use count.
    _fake_smi(tmp_path, monkeypatch, "0, 3 %%\\n1, 99 %%\\n")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert machine.gpu_busy_elsewhere(readings=2, pause_s=0) is False

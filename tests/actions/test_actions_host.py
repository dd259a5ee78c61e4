"""Compile, Verify and Profile over any HarnessPort: summary and reward for the model, the
HarnessResult (whose to_json() is the design's JSON) in harness_result."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from cuda_agent_cli.actions import ActionContext, make_toolbox
from cuda_agent_cli.errors import EnvironmentMissing
from cuda_agent_cli.harness_result import HarnessResult
from cuda_agent_cli.sandbox import Sandbox, SandboxPolicy, SandboxStatus


@dataclasses.dataclass
class Result(HarnessResult):
    """A harness result whose summary is the test's own text."""

    text: str = ""

    def summary(self) -> str:
        return self.text


def outcome(data: dict[str, Any], text: str) -> Result:
    return dataclasses.replace(Result.from_json(data), text=text)


def _result(compiled: bool, correct: bool, reward: int | None, timings: dict | None = None) -> dict[str, Any]:
    return {
        "compiled": compiled,
        "correct": correct,
        "reward": reward,
        "device": "cpu",
        "policy": "strict",
        "errors": [] if compiled else ["kernels/relu.cu:3: error: expected ';'"],
        "warnings": [],
        "checks": [],
        "timings": timings,
        "environment": {"gpu": None, "torch": "2.13", "cuda": None},
    }


class FakeHarness:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def compile(self) -> Result:
        self.calls.append("compile")
        return outcome(_result(False, False, -1), "compile failed: kernels/relu.cu:3: error: expected ';'")

    def verify(self) -> Result:
        self.calls.append("verify")
        return outcome(_result(True, True, None), "correct on 5 seeds")

    def profile(self) -> Result:
        self.calls.append("profile")
        t = {
            "eager_us": 100.0,
            "compile_us": 80.0,
            "candidate_us": 50.0,
            "speedup_vs_eager": 2.0,
            "speedup_vs_compile": 1.6,
            "method": "cuda-events",
            "trials": 100,
        }
        return outcome(_result(True, True, 3, t), "1.60x faster than torch.compile, 2.00x than eager")


class BrokenHarness(FakeHarness):
    def verify(self) -> Result:
        raise EnvironmentMissing("no C++ compiler", "install g++")


def _toolbox(tmp_path: Path, harness: Any):
    ws = tmp_path / "ws"
    (ws / "kernels").mkdir(parents=True)
    sb = Sandbox(
        SandboxPolicy.optimize(ws, [], sandbox_uid=None, sandbox_gid=None),
        SandboxStatus(False, "unit tests"),
        enabled=False,
    )
    return make_toolbox(ActionContext(sb, harness=harness))


def test_host_tools_are_offered_only_with_a_harness(tmp_path: Path) -> None:
    assert "Compile" not in _toolbox(tmp_path / "a", None).names()
    assert {"Compile", "Verify", "Profile"} <= set(_toolbox(tmp_path / "b", FakeHarness()).names())


def test_compile_failure_is_an_error_with_the_compiler_message(tmp_path: Path) -> None:
    h = FakeHarness()
    r = _toolbox(tmp_path, h).call("Compile", {})
    assert r.is_error and "expected ';'" in r.output and "reward: -1" in r.output
    assert r.harness_result.to_json()["compiled"] is False and h.calls == ["compile"]


def test_profile_returns_summary_reward_and_the_design_json(tmp_path: Path) -> None:
    r = _toolbox(tmp_path, FakeHarness()).call("Profile", {})
    assert not r.is_error
    assert "1.60x faster" in r.output and "reward: 3" in r.output
    data = r.harness_result.to_json()
    assert data["timings"]["speedup_vs_compile"] == 1.6 and data["reward"] == 3


def test_verify_passes_and_takes_no_arguments(tmp_path: Path) -> None:
    tb = _toolbox(tmp_path, FakeHarness())
    assert not tb.call("Verify", {}).is_error
    bad = tb.call("Verify", {"path": "model_new.py"})
    assert bad.is_error and "unknown parameter `path`" in bad.output


def test_a_harness_that_cannot_run_is_reported_not_raised(tmp_path: Path) -> None:
    r = _toolbox(tmp_path, BrokenHarness()).call("Verify", {})
    assert r.is_error and "no C++ compiler" in r.output and "install g++" in r.output

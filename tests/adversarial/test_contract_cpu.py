"""The module's contract through the real pipeline on the CPU (docs/security.md, threats 39-45).

Every attack is rejected by one of its named checks; every honest twin passes every check,
with the precision it was verified at named in its result.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from adversarial.contract import ATTACKS, HONEST, TIMING, ContractCase
from adversarial.workspaces import Workspaces

pytestmark = pytest.mark.integration

CANDIDATES = Path(__file__).parent / "candidates"


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory: pytest.TempPathFactory) -> Workspaces:
    return Workspaces(tmp_path_factory.mktemp("contract"), CANDIDATES)


def run(name: str, workspaces: Workspaces, kernels: str = "cpu_contract", action: str = "verify", static_checks=True):
    from cuda_agent_cli.harness import profile_path, verify_path

    do = profile_path if action == "profile" else verify_path
    return do(workspaces.materialize(name, kernels), device="cpu", policy="strict", static_checks=static_checks)


def failed_checks(result) -> dict[str, str]:
    return {c.name: c.detail for c in result.checks if not c.passed}


@pytest.mark.parametrize("name", HONEST)
def test_honest_twin_keeps_the_contract(name: str, workspaces, harness_cache):
    result = run(name, workspaces)
    assert failed_checks(result) == {}, result.summary()
    assert result.correct and result.reward != -1
    names = {c.name for c in result.checks}
    assert {"module_state", "changed_weights", "library_calls", "relative_error"} <= names
    # The precision it was verified at: the module's own dtype, by default.
    assert result.to_json()["precision"] == "float32"


@pytest.mark.parametrize("case", ATTACKS, ids=lambda c: c.name)
def test_contract_attack_is_rejected(case: ContractCase, workspaces, harness_cache):
    result = run(case.name, workspaces, case.kernels, case.action, case.static_checks)
    failed = failed_checks(result)
    assert not result.correct and result.reward == -1, result.summary()
    hit = [name for name in case.rejected_by if name in failed]
    assert hit, f"expected one of {case.rejected_by} to fail; failed: {failed}"
    if case.says:
        assert case.says in failed[hit[0]], failed[hit[0]]


@pytest.mark.parametrize("trick, twin, threat", TIMING, ids=[t[0] for t in TIMING])
def test_replay_keyed_on_structural_inputs_buys_no_speed(trick: str, twin: str, threat: int, workspaces, harness_cache):
    honest = run(twin, workspaces, action="profile")
    assert honest.correct and honest.timings is not None, honest.summary()
    tricked = run(trick, workspaces, action="profile")
    if tricked.correct:
        assert tricked.timings is not None
        fastest = honest.timings.candidate_us
        if tricked.timings.candidate_us < 0.7 * fastest:
            # A small CPU kernel's time swings from one profile to the next: the twin once more.
            again = run(twin, workspaces, action="profile")
            assert again.timings is not None
            fastest = min(fastest, again.timings.candidate_us)
        assert tricked.timings.candidate_us >= 0.7 * fastest, (
            f"{trick} timed {tricked.timings.candidate_us:.1f} us against {fastest:.1f} us"
        )
    else:
        assert "timed_outputs" in failed_checks(tricked) or "correctness" in failed_checks(tricked)

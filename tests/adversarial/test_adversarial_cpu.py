"""Adversarial and honest candidates through the real pipeline on the CPU (docs/security.md).

Each adversarial candidate must be rejected, with the check named in manifest.py among the
failed checks; each honest candidate must pass every check. Candidates that share a kernel
set share one workspace directory, so each kernel set is compiled once per test session.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from adversarial import contract
from adversarial.cache_check import assert_not_forged, baseline_files
from adversarial.manifest import ADVERSARIAL, BELOW_RESOLUTION, ESCAPEES, HONEST, LAYOUT_TRICKS, TIMING_TRICKS, Case
from adversarial.workspaces import Workspaces

pytestmark = pytest.mark.integration

CANDIDATES = Path(__file__).parent / "candidates"


@pytest.fixture(scope="session")
def workspaces(tmp_path_factory: pytest.TempPathFactory) -> Workspaces:
    return Workspaces(tmp_path_factory.mktemp("adversarial"), CANDIDATES)


def run(case: Case, workspaces: Workspaces):
    from cuda_agent_cli.harness import profile_path, verify_path

    action = profile_path if case.action == "profile" else verify_path
    return action(
        workspaces.materialize(case.name, case.kernels),
        device="cpu",
        policy=case.policy,
        confine_writes=case.confine_writes,
        static_checks=case.static_checks,
    )


def failed_checks(result) -> dict[str, str]:
    return {c.name: c.detail for c in result.checks if not c.passed}


def test_manifest_matches_the_candidate_directories():
    listed = (
        {c.name for c in ADVERSARIAL + HONEST}
        | {t[0] for t in TIMING_TRICKS}
        | {t[0] for t in LAYOUT_TRICKS}
        | set(ESCAPEES)
        | {t[0] for t in BELOW_RESOLUTION}
        | {c.name for c in contract.ATTACKS}
        | {t[0] for t in contract.TIMING}
        | set(contract.HONEST)
    )
    on_disk = {p.name for p in CANDIDATES.iterdir() if p.is_dir()}
    assert listed == on_disk
    assert len(ADVERSARIAL) >= 24 and len(HONEST) >= 12


@pytest.mark.parametrize("case", HONEST, ids=lambda c: c.name)
def test_honest_candidate_passes(case: Case, workspaces, harness_cache):
    result = run(case, workspaces)
    assert failed_checks(result) == {}
    assert result.correct and result.reward != -1
    names = {c.name for c in result.checks}
    assert {
        "static",
        "correctness",
        "relative_error",
        "nonconstant",
        "aliasing",
        "inputs_unchanged",
        "output_type",
        "harness_integrity",
        "precision_flags",
    } <= names
    if case.policy == "strict":
        assert "torch_ops" in names


@pytest.mark.parametrize("case", ADVERSARIAL, ids=lambda c: c.name)
def test_adversarial_candidate_is_rejected(case: Case, workspaces, harness_cache):
    result = run(case, workspaces)
    failed = failed_checks(result)
    assert not result.correct and result.reward == -1
    assert case.expected in failed, f"expected {case.expected} to fail; failed: {failed}"
    assert failed[case.expected], "a rejection must say why"
    if case.finding:
        assert f"error {case.finding} at" in failed["static"]
    if case.says:
        assert case.says in failed[case.expected], failed[case.expected]
    # A process a candidate started does not outlive its evaluation.
    assert _processes_named("ca-escapee") == []
    # The JSON a model or user sees names the failed check too.
    payload = result.to_json()
    assert any(c["name"] == case.expected and not c["passed"] for c in payload["checks"])


# A trick that stalls its null blocks is held to its work less the slack believed over the
# baselines' process's null blocks, and then divided by the bound's own allowance for noise
# (BOUND_SLACK): it may read up to about twice its twin's speed, never the 1000x it claims.
_FLOOR = {"r_slow_null_blocks_heavy": 0.5}


@pytest.mark.parametrize("trick, twin, threat, kernels", TIMING_TRICKS, ids=[t[0] for t in TIMING_TRICKS])
def test_timing_trick_buys_no_speed(trick: str, twin: str, threat: int, kernels: str, workspaces, harness_cache):
    honest = run(Case(twin, None, None, action="profile"), workspaces)
    tricked = run(Case(trick, None, threat, kernels=kernels, action="profile", static_checks=False), workspaces)
    assert honest.correct and honest.timings is not None
    # An honest process's null blocks are believed as they are: no warning says otherwise.
    assert not [w for w in honest.warnings if "took far longer" in w], honest.warnings
    if tricked.correct:
        assert tricked.timings is not None
        # Timed calls see new input values each time, so a cache of results never hits and the
        # trick pays for the real work (plus its lookups). Against the faster of two honest runs,
        # one before and one after: a relu of 64x512 reads 65-105 us from one profile to the next.
        again = run(Case(twin, None, None, action="profile"), workspaces)
        assert again.timings is not None
        fastest = min(honest.timings.candidate_us, again.timings.candidate_us)
        floor = _FLOOR.get(trick, 0.7)
        assert tricked.timings.candidate_us >= floor * fastest, (
            f"{trick} timed {tricked.timings.candidate_us:.1f} us against {fastest:.1f} us"
        )


@pytest.mark.parametrize("trick, threat, kernels", LAYOUT_TRICKS, ids=[t[0] for t in LAYOUT_TRICKS])
def test_layout_work_handed_to_the_judge_is_paid_inside_the_clock(
    trick: str, threat: int, kernels: str, workspaces, harness_cache
):
    tricked = run(Case(trick, None, threat, kernels=kernels, action="profile", static_checks=False), workspaces)
    assert tricked.correct and tricked.timings is not None
    assert tricked.timings.speedup_vs_eager < 1.5, tricked.timings


# A kernel whose whole time is below what the harness's clock resolves around its own work per
# call can still forge its claims: the result says so, is uncertain, and its reward is held at 1.
@pytest.mark.parametrize("trick, threat, kernels", BELOW_RESOLUTION, ids=[t[0] for t in BELOW_RESOLUTION])
def test_a_trick_below_the_clocks_resolution_is_flagged(
    trick: str, threat: int, kernels: str, workspaces, harness_cache
):
    tricked = run(Case(trick, None, threat, kernels=kernels, action="profile", static_checks=False), workspaces)
    assert tricked.correct and tricked.timings is not None
    warnings = " | ".join(tricked.warnings)
    assert "took far longer around calls that ran none of its code" in warnings, warnings
    assert "the reward is held at 1" in warnings and tricked.timings.uncertain and tricked.reward == 1, warnings


def _processes_named(name: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "comm").read_text().strip() == name:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.parametrize("name", ESCAPEES)
def test_a_process_left_behind_dies_with_its_evaluation(name: str, workspaces, harness_cache):
    honest = run(Case("h_relu_destination", None, None, action="profile"), workspaces)
    result = run(Case(name, None, 29, kernels="cpu_escape", action="profile", static_checks=False), workspaces)
    assert _processes_named("ca-escapee") == []
    # It was stopped while the baselines were timed, so it did not slow them down (what it is
    # for: a busy machine under eager and torch.compile only). The baselines are compared, not
    # the speedups: on a shared 2-core machine a small kernel's own time swings 2x between runs.
    # Against the slower of two honest runs, one before and one after, so a moment of load from
    # other programs on the machine is not taken for the escapee.
    if result.correct:
        after = run(Case("h_relu_destination", None, None, action="profile"), workspaces)
        assert result.timings is not None and honest.timings is not None and after.timings is not None
        # Plus 25 us: a relu of 64x512 takes 15-25 us on one thread, where a cache line more or
        # less moves a call by a few microseconds; a process busy beside it costs far more.
        eager = max(honest.timings.eager_us, after.timings.eager_us)
        compiled = max(honest.timings.compile_us, after.timings.compile_us)
        assert result.timings.eager_us <= 1.5 * eager + 25.0, result.summary()
        assert result.timings.compile_us <= 1.5 * compiled + 25.0, result.summary()


def test_candidate_cannot_write_the_harness_cache(workspaces, harness_cache):
    """The forging candidate's writes are refused by the kernel, so no round ever reads them."""
    from cuda_agent_cli.assets.tools import landlock

    if landlock.abi_version() < 1:
        pytest.skip("this kernel has no Landlock")
    before = baseline_files(harness_cache)
    # The trick kernels reach Python from C++, which strict's static checks refuse: the runtime layer alone.
    result = run(
        Case("r_forge_baselines_cache", "crash", 2, kernels="cpu_tricks", action="profile", static_checks=False),
        workspaces,
    )
    assert "Permission denied" in failed_checks(result)["crash"]
    assert_not_forged(before, baseline_files(harness_cache))
    assert result.check("write_confinement") is not None and result.check("write_confinement").passed
    # So is the bytecode the worker keeps of torch (where torch came without any).
    plant = run(Case("r_plant_bytecode", "crash", 2, kernels="cpu_tricks", static_checks=False), workspaces)
    assert "Permission denied" in failed_checks(plant)["crash"]
    assert not list((harness_cache / "bytecode").rglob("*planted*"))
    # The input files are out of reach too: the rewrite fails before input_files has to see it.
    rewrite = run(
        Case("r_rewrite_input_files", "crash", 8, kernels="cpu_tricks", policy="hybrid", static_checks=False),
        workspaces,
    )
    assert "Permission denied" in failed_checks(rewrite)["crash"]

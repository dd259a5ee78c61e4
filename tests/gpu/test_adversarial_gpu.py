"""GPU-only tricks and honest CUDA kernels through the real pipeline (run on a GPU machine).

    pytest -m gpu tests/gpu/test_adversarial_gpu.py

Same table as the CPU suite (tests/adversarial/manifest.py: GPU_ADVERSARIAL, GPU_HONEST), plus
the side-stream trick, which is judged against its honest twin: the same slow kernel launched
on the current stream. Hiding work on a side stream must not buy a better time unnoticed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

from adversarial.cache_check import assert_not_forged, baseline_files  # noqa: E402
from adversarial.manifest import (  # noqa: E402
    GPU_ADVERSARIAL,
    GPU_BASELINE_TRICKS,
    GPU_CACHE_TRICKS,
    GPU_HONEST,
    GPU_JUDGED_TRICKS,
    GPU_TIMING_TRICKS,
    Case,
)
from adversarial.workspaces import Workspaces  # noqa: E402

CANDIDATES = TESTS / "adversarial" / "candidates_gpu"


def _cudnn_paths() -> dict[str, str]:
    """Where the cuDNN that torch uses keeps its headers and library (pip wheels)."""
    try:
        import nvidia.cudnn as cudnn_pkg
    except ImportError:
        return {}
    base = Path(list(cudnn_pkg.__path__)[0])
    include, lib = base / "include", base / "lib"
    if not (include / "cudnn.h").is_file():
        return {}
    if not any(lib.glob("libcudnn.so*")):
        return {}
    return {"@CUDNN_INCLUDE@": str(include), "@CUDNN_LIB@": str(lib)}


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory: pytest.TempPathFactory) -> Workspaces:
    return Workspaces(tmp_path_factory.mktemp("adversarial-gpu"), CANDIDATES)


def _substitutions(case: Case, tmp: Path) -> dict[str, str]:
    if case.name != "gh_conv_cudnn":
        return {}
    paths = _cudnn_paths()
    if not paths:
        pytest.skip("cuDNN headers (the nvidia-cudnn wheel) are not installed")
    lib = Path(paths["@CUDNN_LIB@"])
    if (lib / "libcudnn.so").exists():
        return {**paths, "@CUDNN_LINK@": "-lcudnn"}
    # pip ships the versioned file only (libcudnn.so.9): named as it is.
    versioned = sorted(p.name for p in lib.glob("libcudnn.so.*"))[0]
    return {**paths, "@CUDNN_LINK@": f"-l:{versioned}"}


def run(case: Case, workspaces: Workspaces, tmp: Path, action: str | None = None):
    from cuda_agent_cli.harness import profile_path, verify_path

    ws = workspaces.materialize(case.name, case.kernels, _substitutions(case, tmp))
    fn = profile_path if (action or case.action) == "profile" else verify_path
    return fn(ws, device="cuda", policy=case.policy, static_checks=case.static_checks)


def _twin(name: str) -> Case:
    """An honest twin as GPU_HONEST lists it (its kernel set, and whether static checks run)."""
    return next(c for c in GPU_HONEST if c.name == name)


def failed_checks(result) -> dict[str, str]:
    return {c.name: c.detail for c in result.checks if not c.passed}


def test_gpu_manifest_matches_the_candidate_directories():
    from adversarial import contract

    listed = (
        {c.name for c in GPU_ADVERSARIAL + GPU_HONEST}
        | {t for t, _, _ in GPU_TIMING_TRICKS + GPU_BASELINE_TRICKS + GPU_CACHE_TRICKS + GPU_JUDGED_TRICKS}
        | {c.name for c in contract.GPU_ATTACKS}
        | set(contract.GPU_HONEST)
    )
    assert listed == {p.name for p in CANDIDATES.iterdir() if p.is_dir()}


def _landlock_abi() -> int:
    from cuda_agent_cli.assets.tools import landlock

    return landlock.abi_version()


@pytest.mark.parametrize("case", GPU_HONEST, ids=lambda c: c.name)
def test_honest_cuda_candidate_passes(case: Case, gpu, workspaces, tmp_path_factory):
    result = run(case, workspaces, tmp_path_factory.getbasetemp())
    assert failed_checks(result) == {}
    assert result.correct
    assert any(c.name == "extension_kernel" and c.passed for c in result.checks)
    if _landlock_abi() >= 1:
        # Confined writes leave CUDA, cuBLAS, cuDNN and load_inline's build working.
        assert result.check("write_confinement") is not None and result.check("write_confinement").passed


@pytest.mark.parametrize("case", GPU_ADVERSARIAL, ids=lambda c: c.name)
def test_gpu_trick_is_rejected(case: Case, gpu, workspaces, tmp_path_factory):
    result = run(case, workspaces, tmp_path_factory.getbasetemp())
    failed = failed_checks(result)
    assert not result.correct and result.reward == -1
    assert case.expected in failed, f"expected {case.expected} to fail; failed: {failed}"
    if case.says:
        assert case.says in failed[case.expected], failed[case.expected]


def test_cuda_candidate_cannot_write_the_harness_cache(gpu, workspaces, tmp_path_factory, harness_cache_root):
    """The forging candidate's writes are refused by the kernel on the GPU path too."""
    if _landlock_abi() < 1:
        pytest.skip("this kernel has no Landlock")
    cache = harness_cache_root / "cuda-agent"
    before = baseline_files(cache)
    case = next(c for c in GPU_ADVERSARIAL if c.name == "g_forge_baselines_cache")
    result = run(case, workspaces, tmp_path_factory.getbasetemp())
    assert "Permission denied" in failed_checks(result)["crash"]
    assert_not_forged(before, baseline_files(cache))


@pytest.mark.parametrize("trick, twin, threat", GPU_TIMING_TRICKS, ids=[t[0] for t in GPU_TIMING_TRICKS])
def test_gpu_timing_trick_buys_no_speed(trick: str, twin: str, threat: int, gpu, workspaces, tmp_path_factory):
    """Work hidden on other streams, or times rewritten on their way out, against the same kernel
    launched plainly: the harness's own clock must see the work."""
    tmp = tmp_path_factory.getbasetemp()
    honest = run(_twin(twin), workspaces, tmp, action="profile")
    tricked = run(
        Case(trick, None, threat, kernels="cuda_tricks", static_checks=False), workspaces, tmp, action="profile"
    )
    assert honest.correct and honest.timings is not None
    if tricked.correct:
        assert tricked.timings is not None
        assert tricked.timings.candidate_us >= 0.8 * honest.timings.candidate_us, (
            f"{trick} measured {tricked.timings.candidate_us:.1f} us against {honest.timings.candidate_us:.1f} us"
        )


@pytest.mark.parametrize("trick, twin, threat", GPU_BASELINE_TRICKS, ids=[t[0] for t in GPU_BASELINE_TRICKS])
def test_gpu_work_beside_the_baselines_buys_no_speed(
    trick: str, twin: str, threat: int, gpu, workspaces, tmp_path_factory
):
    """Work the candidate leaves on the device, or keeps running there while its process is
    stopped, shares the device with the baselines' blocks: those blocks are made again once it has
    drained, and where it never does, the round fails instead of reading the baselines slow."""
    tmp = tmp_path_factory.getbasetemp()
    honest = run(_twin(twin), workspaces, tmp, action="profile")
    tricked = run(
        Case(trick, None, threat, kernels="cuda_tricks", static_checks=False), workspaces, tmp, action="profile"
    )
    assert honest.correct and honest.timings is not None
    assert not honest.timing_detail.get("trusted_retries"), honest.timing_detail
    if not tricked.correct:
        assert "device_contention" in failed_checks(tricked), failed_checks(tricked)
        return
    assert tricked.timings is not None
    assert tricked.timings.speedup_vs_eager <= 1.15 * honest.timings.speedup_vs_eager, (
        f"{trick} read {tricked.timings.speedup_vs_eager:.2f}x against eager, its twin "
        f"{honest.timings.speedup_vs_eager:.2f}x (eager {tricked.timings.eager_us:.1f} against "
        f"{honest.timings.eager_us:.1f} us)"
    )


@pytest.mark.parametrize("trick, twin, threat", GPU_CACHE_TRICKS, ids=[t[0] for t in GPU_CACHE_TRICKS])
def test_gpu_cache_trick_buys_no_speed(trick: str, twin: str, threat: int, gpu, workspaces, tmp_path_factory):
    """Inputs kept in a part of the L2 set aside for persisting lines would outlive the flush: the
    call would read them from L2 where its twin and the baselines read them from memory. Its own
    events, which such a call does not lie to, must read as slow as its twin's (24 MB read in
    about 13 us on an H200; kept in L2 by the harness's own call, about 11 us:
    benchmarks/l2_kept_inputs.py). In the harness's rounds this candidate gained nothing even with
    the reset switched off, so tests/gpu/test_l2_persistence_gpu.py holds the call itself."""
    tmp = tmp_path_factory.getbasetemp()
    honest = run(_twin(twin), workspaces, tmp, action="profile")
    tricked = run(
        Case(trick, None, threat, kernels="cuda_tricks", static_checks=False), workspaces, tmp, action="profile"
    )
    assert honest.correct and tricked.correct, (failed_checks(honest), failed_checks(tricked))
    honest_us = honest.timing_detail["candidate"]["events_us"]
    tricked_us = tricked.timing_detail["candidate"]["events_us"]
    assert tricked_us >= 0.95 * honest_us, f"{trick}'s calls read {tricked_us:.2f} us, {twin}'s {honest_us:.2f} us"


@pytest.mark.parametrize("trick, twin, threat", GPU_JUDGED_TRICKS, ids=[t[0] for t in GPU_JUDGED_TRICKS])
def test_gpu_replay_or_layout_trick_buys_no_speed(
    trick: str, twin: str, threat: int, gpu, workspaces, tmp_path_factory
):
    """Answers replayed by a key of a few input values (integer ids, signs), which every timed call
    now draws anew, and an expanded view whose copies the judge would have made after the clock:
    rejected, or timed with the work paid for, beside the honest twin."""
    tmp = tmp_path_factory.getbasetemp()
    honest = run(_twin(twin), workspaces, tmp, action="profile")
    tricked = run(
        Case(trick, None, threat, kernels="cuda_judged", static_checks=False), workspaces, tmp, action="profile"
    )
    assert honest.correct and honest.timings is not None, failed_checks(honest)
    if tricked.correct:
        assert tricked.timings is not None
        assert tricked.timings.candidate_us >= 0.8 * honest.timings.candidate_us, (
            f"{trick} measured {tricked.timings.candidate_us:.1f} us against {honest.timings.candidate_us:.1f} us"
        )

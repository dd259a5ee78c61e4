"""The module's contract on the GPU (docs/security.md, threats 39-45), through the real pipeline.

    pytest -m gpu tests/gpu/test_contract_gpu.py

Every attack of tests/adversarial/contract.py's GPU_ATTACKS is rejected by one of its named
checks, every honest twin passes every check at the module's own precision, and a profile taken
while another program keeps the GPU busy is never the kernel's failure: measured, or marked
`not_measured` with a null reward.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

from adversarial.contract import GPU_ATTACKS, GPU_HONEST, ContractCase  # noqa: E402
from adversarial.workspaces import Workspaces  # noqa: E402

CANDIDATES = TESTS / "adversarial" / "candidates_gpu"


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory: pytest.TempPathFactory) -> Workspaces:
    return Workspaces(tmp_path_factory.mktemp("contract-gpu"), CANDIDATES)


def run(name: str, workspaces: Workspaces, kernels: str = "cuda_contract", action: str = "verify"):
    from cuda_agent_cli.harness import profile_path, verify_path

    do = profile_path if action == "profile" else verify_path
    return do(workspaces.materialize(name, kernels), device="cuda", policy="strict")


def failed_checks(result) -> dict[str, str]:
    return {c.name: c.detail for c in result.checks if not c.passed}


@pytest.mark.parametrize("name", GPU_HONEST)
def test_honest_twin_keeps_the_contract_on_the_gpu(name: str, gpu, workspaces):
    result = run(name, workspaces)
    assert failed_checks(result) == {}, result.summary()
    assert result.correct and result.precision == "float32"
    assert {"module_state", "changed_weights", "library_calls"} <= {c.name for c in result.checks}


@pytest.mark.parametrize("case", GPU_ATTACKS, ids=lambda c: c.name)
def test_contract_attack_is_rejected_on_the_gpu(case: ContractCase, gpu, workspaces):
    result = run(case.name, workspaces, case.kernels, case.action)
    failed = failed_checks(result)
    assert not result.correct and result.reward == -1, result.summary()
    hit = [name for name in case.rejected_by if name in failed]
    assert hit, f"expected one of {case.rejected_by} to fail; failed: {failed}"
    if case.says:
        assert case.says in failed[hit[0]], failed[hit[0]]


_BUSY = textwrap.dedent(
    """
    import time, torch
    a = torch.randn(8192, 8192, device="cuda")
    end = time.time() + float(__import__("sys").argv[1])
    print("busy", flush=True)
    while time.time() < end:
        a = (a @ a).clamp_(-1, 1)
    torch.cuda.synchronize()
    """
)


def test_a_gpu_busy_with_another_program_is_never_the_kernels_failure(gpu, workspaces):
    """Another program keeps the GPU busy for the whole profile: the honest kernel is measured
    (under a warning) or, where the harness's trusted blocks could not get a quiet device, marked
    not measured with a null reward; never rejected with -1."""
    busy = subprocess.Popen([sys.executable, "-c", _BUSY, "240"], stdout=subprocess.PIPE, text=True)
    try:
        assert busy.stdout is not None and busy.stdout.readline().strip() == "busy"
        time.sleep(2.0)
        result = run("gh_matmul_plain", workspaces, action="profile")
    finally:
        busy.kill()
        busy.wait()
    assert result.reward != -1, result.summary()
    assert result.correct, result.summary()
    if result.not_measured:
        assert result.reward is None and result.timings is None
        assert result.to_json()["not_measured"]
    else:
        assert result.timings is not None

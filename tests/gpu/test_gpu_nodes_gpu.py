"""On a real GPU machine: a sandbox started with CUDA_VISIBLE_DEVICES naming one GPU (as a bench
slot is) binds that GPU's node only, and CUDA works inside on it.

Run on the GPU machine: pytest -m gpu -q tests/gpu/test_gpu_nodes_gpu.py
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from cuda_agent_cli.gpu_nodes import read_gpus
from cuda_agent_cli.sandbox import Sandbox, SandboxPolicy, probe

pytestmark = pytest.mark.gpu


def test_the_driver_files_give_every_gpu_its_minor() -> None:
    gpus = read_gpus()
    assert gpus, "nvidia-smi shows no GPU"
    assert all(g.minor is not None and Path(f"/dev/nvidia{g.minor}").exists() for g in gpus), gpus


@pytest.mark.parametrize("order", ["PCI_BUS_ID", None])
def test_a_sandbox_for_one_gpu_sees_only_its_node(tmp_path: Path, order: str | None) -> None:
    status = probe()
    assert status.available, f"the sandbox cannot run here: {status.detail}"
    gpu = read_gpus()[-1]  # the last GPU: on a machine of several, not the one at minor 0 by chance
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")}
    env["CUDA_VISIBLE_DEVICES"] = gpu.index
    if order:
        env["CUDA_DEVICE_ORDER"] = order
    ws = tmp_path / "ws"
    ws.mkdir()
    sb = Sandbox(SandboxPolicy.optimize(ws), status, env=env)
    sb.prepare()
    script = (
        "ls -1 /dev | grep -E '^nvidia[0-9]+$'; python -c \"import torch; "
        "print('devices', torch.cuda.device_count()); print('uuid', torch.cuda.get_device_properties(0).uuid)\""
    )
    out = subprocess.run(sb.argv(script), env=sb.popen_env(), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert [ln for ln in out.stdout.splitlines() if ln.startswith("nvidia")] == [f"nvidia{gpu.minor}"]
    assert "devices 1" in out.stdout
    # torch prints the UUID without its "GPU-" prefix.
    assert gpu.uuid.removeprefix("GPU-") in out.stdout, (gpu, out.stdout)

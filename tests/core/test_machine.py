"""machine: this machine's GPUs from one nvidia-smi query, and the device decided from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent_cli import machine
from cuda_agent_cli.errors import BadInput

SMI = "0, NVIDIA H200, 9.0\n1, NVIDIA A100-SXM4-80GB, 8.0\n"


@pytest.fixture
def smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A fake nvidia-smi that counts its calls; the cached answers cleared around the test."""
    calls = tmp_path / "calls"
    script = tmp_path / "nvidia-smi"
    script.write_text(f"#!/bin/sh\necho x >> {calls}\ncat <<'EOF'\n{SMI}EOF\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    machine._query_gpus.cache_clear()
    machine.this_machine.cache_clear()
    yield lambda: len(calls.read_text().splitlines()) if calls.exists() else 0
    machine._query_gpus.cache_clear()
    machine.this_machine.cache_clear()


def test_every_reader_shares_one_query(smi, monkeypatch: pytest.MonkeyPatch) -> None:
    from cuda_agent_cli.bench.local_pool import visible_gpus

    assert [(g.index, g.name, g.arch) for g in machine.all_gpus()] == [
        (0, "NVIDIA H200", "sm_90"),
        (1, "NVIDIA A100-SXM4-80GB", "sm_80"),
    ]
    assert visible_gpus() == ["0", "1"]
    assert machine.pick_device(None) == "cuda"
    assert machine.this_machine().arch("cuda") == "sm_90"
    assert smi() == 1


def test_visible_devices_pick_the_gpus(smi, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert [g.name for g in machine.this_machine().gpus] == ["NVIDIA A100-SXM4-80GB"]
    assert len(machine.all_gpus()) == 2  # a scheduler still sees every GPU


def test_no_nvidia_smi_is_the_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    machine._query_gpus.cache_clear()
    machine.this_machine.cache_clear()
    try:
        assert machine.all_gpus() == ()
        assert machine.pick_device(None) == "cpu"
        assert machine.pick_device("cuda") == "cuda"  # asked for: the harness checks it can
        with pytest.raises(BadInput, match="unknown device"):
            machine.pick_device("tpu")
    finally:
        machine._query_gpus.cache_clear()
        machine.this_machine.cache_clear()

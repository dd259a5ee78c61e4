"""The sandbox binds only the device nodes of the GPUs CUDA_VISIBLE_DEVICES names (fake inputs:
the driver's /proc files and nvidia-smi's answer as a four-GPU machine gives them)."""

from pathlib import Path

import pytest

from cuda_agent_cli import gpu_nodes, sandbox
from cuda_agent_cli.gpu_nodes import (
    normalize_bus_id,
    parse_minor,
    parse_smi,
    read_gpus,
    select_nodes,
    visible_gpus,
)
from cuda_agent_cli.sandbox import Sandbox, SandboxPolicy, SandboxStatus

SMI = """0, GPU-aaaa1111-0000-0000-0000-000000000000, 00000000:1B:00.0, NVIDIA H200
1, GPU-bbbb2222-0000-0000-0000-000000000000, 00000000:43:00.0, NVIDIA H200
2, GPU-cccc3333-0000-0000-0000-000000000000, 00000000:52:00.0, NVIDIA H200
3, GPU-dddd4444-0000-0000-0000-000000000000, 00000000:61:00.0, NVIDIA H200
"""
# The driver's minors need not follow the bus order.
MINORS = {"0000:1b:00.0": 2, "0000:43:00.0": 0, "0000:52:00.0": 3, "0000:61:00.0": 1}
NODES = [
    "/dev/nvidia-caps",
    "/dev/nvidia-modeset",
    "/dev/nvidia-uvm",
    "/dev/nvidia-uvm-tools",
    "/dev/nvidia0",
    "/dev/nvidia1",
    "/dev/nvidia2",
    "/dev/nvidia3",
    "/dev/nvidiactl",
    "/dev/dri",
]
SHARED = [
    "/dev/nvidia-caps",
    "/dev/nvidia-modeset",
    "/dev/nvidia-uvm",
    "/dev/nvidia-uvm-tools",
    "/dev/nvidiactl",
    "/dev/dri",
]
INFO = """Model: \t\t NVIDIA H200
IRQ:   \t\t 62
GPU UUID: \t GPU-bbbb2222-0000-0000-0000-000000000000
Video BIOS: \t 96.00.a5.00.01
Bus Type: \t PCIe
DMA Size: \t 52 bits
DMA Mask: \t 0xfffffffffffff
Bus Location: \t 0000:43:00.0
Device Minor: \t 0
GPU Excluded:\t No
"""


def gpus():
    return parse_smi(SMI, MINORS)


def visible_minors(visible: str, gpus: list, pci_order: bool) -> set[int] | None:
    """The minors of the GPUs `visible` names, whose nodes nodes_for keeps (None: all of them)."""
    chosen = visible_gpus(visible, gpus, pci_order)
    return None if chosen is None else {g.minor for g in chosen if g.minor is not None}


def test_the_driver_files_and_nvidia_smi_give_each_index_its_minor():
    assert normalize_bus_id("00000000:1B:00.0") == "0000:1b:00.0" == normalize_bus_id("0000:1b:00.0")
    assert parse_minor(INFO) == 0 and parse_minor("Model: x\n") is None
    assert [(g.index, g.minor) for g in gpus()] == [("0", 2), ("1", 0), ("2", 3), ("3", 1)]


@pytest.mark.parametrize(
    "visible, minors",
    [
        ("0", {2}),
        ("3", {1}),
        ("1,2", {0, 3}),
        ("GPU-cccc3333", {3}),
        ("2,7,0", {3}),  # CUDA stops at the first entry that names no GPU
        ("-1", set()),
        ("", set()),
    ],
)
def test_visible_devices_select_their_minors(visible, minors):
    assert visible_minors(visible, gpus(), pci_order=False) == minors


def test_what_cannot_be_told_for_certain_keeps_every_gpu():
    mixed = parse_smi(
        SMI.replace(
            "1, GPU-bbbb2222-0000-0000-0000-000000000000, 00000000:43:00.0, NVIDIA H200",
            "1, GPU-bbbb2222-0000-0000-0000-000000000000, 00000000:43:00.0, NVIDIA L4",
        ),
        MINORS,
    )
    # Mixed models: CUDA's default order is fastest first, not nvidia-smi's bus order...
    assert visible_minors("1", mixed, pci_order=False) is None
    assert visible_minors("1", mixed, pci_order=True) == {0}  # ...unless CUDA_DEVICE_ORDER=PCI_BUS_ID
    assert visible_minors("MIG-1234", gpus(), pci_order=True) is None
    assert visible_minors("GPU-", gpus(), pci_order=True) is None  # matches four GPUs
    assert visible_minors("0", parse_smi(SMI, {}), pci_order=True) is None  # no /proc entries
    assert select_nodes(NODES, None) == NODES


def test_only_the_selected_gpu_node_and_the_shared_ones_are_kept():
    assert select_nodes(NODES, {2}) == SHARED[:4] + ["/dev/nvidia2"] + SHARED[4:]
    assert select_nodes(NODES, set()) == ["/dev/dri"]


def test_read_gpus_from_the_driver_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    proc = tmp_path / "gpus"
    for bus, minor in MINORS.items():
        (proc / bus).mkdir(parents=True)
        (proc / bus / "information").write_text(INFO.replace("Device Minor: \t 0", f"Device Minor: \t {minor}"))
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\ncat <<'EOF'\n{SMI}EOF\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    assert [(g.index, g.minor) for g in read_gpus(proc)] == [("0", 2), ("1", 0), ("2", 3), ("3", 1)]
    monkeypatch.setenv("PATH", "/nonexistent")
    assert read_gpus(proc) == []  # no driver tools: nothing known, so nothing is filtered


def test_the_sandbox_binds_only_the_slot_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(sandbox, "gpu_devices", lambda: list(NODES))
    monkeypatch.setattr(gpu_nodes, "read_gpus", gpus)
    status = SandboxStatus(True, "ok", bwrap="/usr/bin/bwrap")
    root = tmp_path / "ws"
    root.mkdir()

    def bound(env: dict) -> tuple[list[str], str | None]:
        box = Sandbox(SandboxPolicy.optimize(root), status, env=env)
        argv = box.argv("true")
        return [argv[i + 1] for i, a in enumerate(argv) if a == "--dev-bind"], box.env().get("CUDA_VISIBLE_DEVICES")

    # A bench slot on GPU 1 (PCI order, as the local pool starts its slots): nvidia0 is its node,
    # and inside, where CUDA enumerates that one GPU only, it is named by its UUID.
    nodes, visible = bound({"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    assert nodes == SHARED[:4] + ["/dev/nvidia0"] + SHARED[4:]
    assert visible == "GPU-bbbb2222-0000-0000-0000-000000000000"
    nodes, visible = bound({"CUDA_VISIBLE_DEVICES": "3,0"})
    assert nodes == SHARED[:4] + ["/dev/nvidia1", "/dev/nvidia2"] + SHARED[4:]
    assert visible == "GPU-dddd4444-0000-0000-0000-000000000000,GPU-aaaa1111-0000-0000-0000-000000000000"
    assert bound({}) == (NODES, None)  # no selection: every GPU, as before
    assert bound({"CUDA_VISIBLE_DEVICES": ""})[0] == ["/dev/dri"]  # no GPU: no NVIDIA node at all
    assert bound({"CUDA_VISIBLE_DEVICES": "MIG-1"}) == (NODES, "MIG-1")  # kept as it is

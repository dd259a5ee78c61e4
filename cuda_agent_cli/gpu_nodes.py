"""Which NVIDIA device nodes the GPUs named by CUDA_VISIBLE_DEVICES need, so a sandbox can show a
process its own GPU and no other.

Every GPU has its node /dev/nvidia<minor>; /dev/nvidiactl, /dev/nvidia-uvm*, /dev/nvidia-modeset
and /dev/nvidia-caps are shared by all of them. A CUDA_VISIBLE_DEVICES entry is an index in CUDA's
order or a GPU UUID; the minor comes from the driver's /proc/driver/nvidia/gpus/<PCI bus id>/
information ("Device Minor"), matched to nvidia-smi's index, UUID and bus id. Whatever cannot be
matched for certain (MIG instances, indices in CUDA's fastest-first order on a machine of mixed
GPUs, no /proc entry) keeps every GPU node: CUDA must keep working, and the variable still
limits what CUDA itself enumerates.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

PROC_GPUS = Path("/proc/driver/nvidia/gpus")
_PER_GPU = re.compile(r"^nvidia(\d+)$")


@dataclass(frozen=True)
class NvidiaGpu:
    index: str  # nvidia-smi's index: PCI bus order
    uuid: str  # "GPU-..."
    bus_id: str  # normalized: "0000:3b:00.0"
    name: str
    minor: int | None


def normalize_bus_id(text: str) -> str:
    """nvidia-smi's "00000000:3B:00.0" and /proc's "0000:3b:00.0" as one spelling."""
    text = text.strip().lower()
    m = re.fullmatch(r"([0-9a-f]+):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])", text)
    if not m:
        return text
    return f"{int(m.group(1), 16):04x}:{m.group(2)}:{m.group(3)}.{m.group(4)}"


def parse_minor(information: str) -> int | None:
    """The "Device Minor:" line of a /proc/driver/nvidia/gpus/*/information file."""
    m = re.search(r"^Device Minor:\s*(\d+)\s*$", information, re.MULTILINE)
    return int(m.group(1)) if m else None


def parse_smi(csv: str, minors: dict[str, int]) -> list[NvidiaGpu]:
    """`nvidia-smi --query-gpu=index,uuid,pci.bus_id,name --format=csv,noheader` lines, with the
    minor of each bus id from `minors`."""
    gpus = []
    for line in csv.splitlines():
        parts = [p.strip() for p in line.split(",", 3)]
        if len(parts) == 4 and parts[0].isdigit():
            bus = normalize_bus_id(parts[2])
            gpus.append(NvidiaGpu(parts[0], parts[1], bus, parts[3], minors.get(bus)))
    return gpus


def visible_gpus(visible: str, gpus: list[NvidiaGpu], pci_order: bool) -> list[NvidiaGpu] | None:
    """The GPUs a CUDA_VISIBLE_DEVICES value selects, in its order; None when that cannot be told
    for certain. CUDA reads the list up to its first entry that names no GPU."""
    chosen: list[NvidiaGpu] = []
    # Without CUDA_DEVICE_ORDER=PCI_BUS_ID, CUDA numbers the fastest GPU first: the same as
    # nvidia-smi's bus order only when every GPU is the same model.
    same_model = len({g.name for g in gpus}) <= 1
    for entry in (e.strip() for e in visible.split(",")):
        if entry.isdigit():
            if not (pci_order or same_model):
                return None
            match = [g for g in gpus if g.index == str(int(entry))]
        elif entry.startswith("GPU-"):
            match = [g for g in gpus if g.uuid.startswith(entry)]
            if len(match) > 1:
                return None  # an ambiguous prefix is an error to CUDA too; keep what works
        elif entry.startswith("MIG-"):
            return None
        else:
            match = []
        if not match:
            break
        if match[0].minor is None:
            return None
        if match[0] not in chosen:
            chosen.append(match[0])
    return chosen


def select_nodes(nodes: list[str], minors: set[int] | None) -> list[str]:
    """`nodes` (paths under /dev) without the per-GPU nodes of GPUs not in `minors`; with no GPU
    selected, without any NVIDIA node at all. None keeps them all."""
    if minors is None:
        return list(nodes)
    keep = []
    for node in nodes:
        name = Path(node).name
        m = _PER_GPU.match(name)
        if m:
            if int(m.group(1)) in minors:
                keep.append(node)
        elif not name.startswith("nvidia") or minors:
            keep.append(node)
    return keep


def query_smi(fields: str, timeout: float) -> subprocess.CompletedProcess[str] | None:
    """`nvidia-smi --query-gpu=FIELDS --format=csv,noheader`, the one place the package runs
    nvidia-smi: `machine` asks it for the GPUs' names and architectures (which device, which
    arch), `read_gpus` for their UUIDs and bus ids. None when there is no nvidia-smi; OSError or
    subprocess.SubprocessError when it could not be run."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    return subprocess.run(
        [smi, f"--query-gpu={fields}", "--format=csv,noheader"], capture_output=True, text=True, timeout=timeout
    )


def read_gpus(proc: Path = PROC_GPUS) -> list[NvidiaGpu]:
    """This machine's GPUs with their minors; [] when the driver or nvidia-smi is absent."""
    minors: dict[str, int] = {}
    try:
        for d in proc.iterdir():
            minor = parse_minor((d / "information").read_text(errors="replace"))
            if minor is not None:
                minors[normalize_bus_id(d.name)] = minor
    except OSError:
        pass
    try:
        out = query_smi("index,uuid,pci.bus_id,name", timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    return parse_smi(out.stdout, minors) if out is not None and out.returncode == 0 else []


def nodes_for(nodes: list[str], env: dict[str, str]) -> tuple[list[str], str | None]:
    """The device nodes a process with environment `env` needs of `nodes`, and the
    CUDA_VISIBLE_DEVICES it must then be given (None: as it is). With only its GPUs' nodes in
    view, CUDA enumerates only those, so an index such as "3" would name nothing: the GPUs are
    named by UUID instead, in the order the variable gave them."""
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return list(nodes), None
    if not visible.strip():
        return select_nodes(nodes, set()), None
    if not any(_PER_GPU.match(Path(n).name) for n in nodes):
        return list(nodes), None
    gpus = read_gpus()
    chosen = visible_gpus(visible, gpus, env.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID") if gpus else None
    if chosen is None:
        return list(nodes), None
    return select_nodes(nodes, {g.minor for g in chosen if g.minor is not None}), ",".join(g.uuid for g in chosen)

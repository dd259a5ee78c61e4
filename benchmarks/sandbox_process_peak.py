"""How many processes and threads honest work needs inside the agent's sandbox.

The sandbox caps the processes and threads of its uid (RLIMIT_NPROC, Limits.nproc). This runs
the heaviest honest commands the agent issues, each in a fresh sandbox with the default limits,
while a sampler inside the same PID namespace counts every task (/proc/*/task/*, which is what
the limit counts) with shell builtins only, so the count itself forks nothing:

  nvcc            nvcc -c of a CUDA kernel (cudafe++, cicc, ptxas, fatbinary, the host compiler)
  torch-extension torch.utils.cpp_extension.load_inline of a C++ op: ninja and the compiler with
                  the torch headers
  torch-threads   python with torch running a 1024x1024 matmul (the intra-op thread pool)

    python benchmarks/sandbox_process_peak.py

Prints the peak per command and the cap. Goal: every peak leaves at least 4x headroom under the
cap. Exit 1 when it does not, or when a command fails.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cuda_agent_cli.sandbox import Sandbox, SandboxPolicy, probe

KERNEL = (
    "__global__ void add(float* a, const float* b, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] += b[i]; }\n"
)
EXTENSION = (
    "import torch\n"
    "from torch.utils.cpp_extension import load_inline\n"
    "src = 'torch::Tensor twice(torch::Tensor x) { return x * 2; }'\n"
    "ext = load_inline(name='peak_probe', cpp_sources=src, functions=['twice'], verbose=False)\n"
    "print(ext.twice(torch.ones(3)).sum().item())\n"
)
THREADS = "import torch; x = torch.randn(1024, 1024); print(float((x @ x).sum()) != 0.0)"

# Counts tasks in this PID namespace every 20 ms until /tmp/peak.done exists; `read -t` on a
# FIFO nobody writes is a sleep that forks nothing.
SAMPLER = (
    "mkfifo /tmp/peak.fifo; exec 9<>/tmp/peak.fifo; max=0; "
    "while [ ! -e /tmp/peak.done ]; do n=0; for t in /proc/[0-9]*/task/[0-9]*; do n=$((n+1)); done; "
    "[ $n -gt $max ] && max=$n && echo $max > /tmp/peak.max; read -t 0.02 -u 9; done"
)


def measure(sb: Sandbox, command: str, timeout: float = 900) -> tuple[int, float, str]:
    """Peak task count while `command` runs in the sandbox, its wall time, and its output."""
    script = (
        f"( {SAMPLER} ) & sampler=$!; ( {command} ); rc=$?; touch /tmp/peak.done; wait $sampler; "
        "echo PEAK=$(cat /tmp/peak.max); exit $rc"
    )
    start = time.monotonic()
    proc = subprocess.run(
        sb.argv(script), env=sb.popen_env(), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
    wall = time.monotonic() - start
    out = proc.stdout + proc.stderr
    peak = next((int(line[5:]) for line in out.splitlines() if line.startswith("PEAK=") and line[5:].isdigit()), -1)
    if proc.returncode != 0:
        raise RuntimeError(f"command failed ({proc.returncode}): {out[-2000:]}")
    return peak, wall, out


def main() -> int:
    status = probe()
    if not status.available:
        print(f"no sandbox here: {status.detail}")
        return 1
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None)
    with tempfile.TemporaryDirectory(prefix="sandbox-peak-") as tmp:
        ws = Path(tmp) / "ws"
        (ws / "kernels").mkdir(parents=True)
        (ws / "kernels" / "add.cu").write_text(KERNEL)
        (ws / "model.py").write_text("")
        (ws / "scratch").mkdir()
        (ws / "scratch" / "ext.py").write_text(EXTENSION)
        sb = Sandbox(SandboxPolicy.optimize(ws, ["model.py"]))
        sb.prepare()
        cap = sb.policy.limits.nproc
        runs = [
            ("torch-threads", f"{sys.executable} -c '{THREADS}'"),
            ("torch-extension", f"{sys.executable} scratch/ext.py"),
        ]
        if nvcc:
            runs.insert(0, ("nvcc", f"{nvcc} -c kernels/add.cu -o /tmp/add.o"))
        worst = 0
        for name, command in runs:
            peak, wall, _ = measure(sb, command)
            worst = max(worst, peak)
            print(f"{name:16s} peak {peak:4d} tasks  ({wall:5.1f} s)")
    print(f"cap {cap}; worst peak {worst}; headroom {cap / max(worst, 1):.1f}x")
    return 0 if worst * 4 <= cap else 1


if __name__ == "__main__":
    sys.exit(main())

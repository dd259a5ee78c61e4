"""The bundled example for `cuda-agent demo`: a real module and one recorded session per device.

The recorded sessions (replay_cpu.jsonl, replay_cuda.jsonl) replay only the model's side;
compile, verify and profile run for real. They are generated from the kernel sources next to
them by `python -m cuda_agent_cli.demo.record`, and a test keeps the two in step.
"""

from __future__ import annotations

import json
import shutil
from importlib import resources
from pathlib import Path
from typing import Any

EXAMPLE = "vit_head.py"
CLASS = "PooledLayerNorm"
# The CPU session times a smaller batch so the demo (and CI) finish in well under a minute.
INPUTS = {"cpu": "x=float32[8,256,384]; init: 384", "cuda": None}
KERNELS = {
    "cpu": ["pooled_layer_norm.cpp"],
    "cuda": ["pooled_layer_norm.cu", "pooled_layer_norm_binding.cpp"],
}


def demo_dir() -> Path:
    return Path(str(resources.files(__name__)))


def replay_path(device: str) -> Path:
    return demo_dir() / f"replay_{device}.jsonl"


def replay_turns(device: str) -> list[dict[str, Any]]:
    """The recorded assistant turns for `device`, built from the sources in this folder."""
    here = demo_dir()
    kernels = [{"name": "Write", "arguments": {"file_path": f"kernels/{name}",
                                               "content": (here / device / name).read_text()}}
               for name in KERNELS[device]]
    what = ("a C++ kernel that takes each token row's mean and variance in one sweep and adds the "
            "row, scaled by its rstd, into a per-batch accumulator (AVX2 where the CPU has it), "
            "parallel over the batch" if device == "cpu" else
            "a CUDA kernel with one warp per token row (float4 loads, warp-shuffle mean and variance), "
            "8 warps per block over 64 tokens, combined in shared memory and added into the output "
            "with one atomic per feature, so x is read exactly once")
    return [
        {"content": "Reading the reference to see exactly what has to be computed.",
         "tool_calls": [{"name": "Read", "arguments": {"file_path": "model.py"}}]},
        {"content": "LayerNorm over the last dim followed by a mean over tokens. Eager and torch.compile "
                    "both read x more than once; since the affine part is linear it can be applied after "
                    f"the average. Writing {what}.",
         "tool_calls": kernels},
        {"content": "Now ModelNew: same constructor and parameters (a LayerNorm holds weight and bias), "
                    "forward calls the kernel.",
         "tool_calls": [{"name": "Write", "arguments": {"file_path": "model_new.py",
                                                       "content": (here / "model_new.py").read_text()}}]},
        {"content": "Building the extension.", "tool_calls": [{"name": "Compile", "arguments": {}}]},
        {"content": "Checking correctness against the reference.",
         "tool_calls": [{"name": "Verify", "arguments": {}}]},
        {"content": "Correct. Timing it against eager and torch.compile.",
         "tool_calls": [{"name": "Profile", "arguments": {}}]},
        {"content": "Done: one fused pass over the input, verified and profiled.", "tool_calls": []},
    ]


def replay_runs_commands(device: str) -> bool:
    """Whether the recorded session for `device` calls any shell tool."""
    from cuda_agent_cli.actions import SHELL_TOOLS

    return any(call.get("name") in SHELL_TOOLS
               for turn in replay_turns(device) for call in turn.get("tool_calls") or [])


def render_replay(device: str) -> str:
    return "".join(json.dumps(turn) + "\n" for turn in replay_turns(device))


def copy_example(dest: Path) -> Path:
    """Copy the example module into `dest` (created); returns the module path."""
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / EXAMPLE
    shutil.copyfile(demo_dir() / EXAMPLE, target)
    return target


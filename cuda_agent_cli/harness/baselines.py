"""Which compiled baselines a harness times beside eager, and what the reward is decided on.

torch.compile's default mode is the paper's baseline and is always timed; max-autotune (without
CUDA graphs) is the strongest compiler setting a kernel is held against call for call, and on
CUDA a CUDA-graph replay (reduce-overhead) is what launch-bound code gets without a kernel.
"""

from __future__ import annotations

import os
from typing import Mapping, Sequence

from cuda_agent_cli.errors import BadInput

COMPILED = ("compile", "autotune", "graphs")
# "paper": faster than eager and default torch.compile (the paper's reward, comparable with its
# figures); "best": faster than eager and the fastest baseline timed.
REWARD_BASELINES = ("paper", "best")
ENV = "CUDA_AGENT_BASELINES"


def compiled_baselines(
    names: Sequence[str] | None, device: str, env: Mapping[str, str] | None = None
) -> tuple[str, ...]:
    """The compiled baselines to time: `names`, else CUDA_AGENT_BASELINES (a comma-separated
    list), else every one the device has. The default mode is always among them."""
    env = os.environ if env is None else env
    if names is None and env.get(ENV, "").strip():
        names = [n.strip() for n in env[ENV].split(",") if n.strip()]
    if names is None:
        names = COMPILED
    unknown = [n for n in names if n not in COMPILED]
    if unknown:
        raise BadInput(
            f"unknown baseline {unknown[0]!r}",
            f"name baselines among {', '.join(COMPILED)} (in {ENV}, comma-separated)",
        )
    wanted = {"compile", *names}
    if device != "cuda":
        wanted.discard("graphs")  # CUDA graphs exist on CUDA only
    return tuple(n for n in COMPILED if n in wanted)


def check_reward_baseline(name: str) -> str:
    if name not in REWARD_BASELINES:
        raise BadInput(f"unknown reward baseline {name!r}", "use --reward-baseline paper or --reward-baseline best")
    return name

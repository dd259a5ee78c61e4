"""Options that several commands share, each defined once (typer's Annotated style)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

DeviceOpt = Annotated[
    Optional[str], typer.Option("--device", help="cuda or cpu (default: cuda when a GPU is present).")
]
ModelOpt = Annotated[Optional[str], typer.Option("--model", help="A litellm model string, or replay:FILE.jsonl.")]
ApiBaseOpt = Annotated[
    Optional[str], typer.Option("--api-base", help="Base URL for OpenAI-compatible or self-hosted models.")
]
PolicyOpt = Annotated[
    Optional[str],
    typer.Option("--policy", help="strict (default: kernels only) or hybrid (torch ops allowed next to a kernel)."),
]
RewardBaselineOpt = Annotated[
    Optional[str],
    typer.Option(
        "--reward-baseline",
        help="What the reward's top step is decided against: paper (default: eager and default "
        "torch.compile, comparable with the paper) or best (eager and the fastest baseline timed: "
        "max-autotune, CUDA graphs).",
    ),
]
PrecisionOpt = Annotated[
    Optional[str],
    typer.Option(
        "--precision",
        help="What outputs are held to: dtype (default: the module's own, from a float64 reference), "
        "tf32, fp16 or bf16 (that compute format, opted into), or kernelbench (the paper's atol = rtol = 1e-2).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of text.")]
MaxTurnsOpt = Annotated[
    Optional[int], typer.Option("--max-turns", help="Stop a session after this many model turns (default 200).")
]
MaxCostOpt = Annotated[
    Optional[float], typer.Option("--max-cost", help="Stop when the session has cost this many USD.")
]
TimeoutOpt = Annotated[Optional[float], typer.Option("--timeout", help="Stop a session after this many seconds.")]
# harness.driver.DEFAULT_TRIALS and _timing_plan (not imported here: --help stays light).
TrialsOpt = Annotated[
    Optional[int],
    typer.Option(
        "--trials",
        min=1,
        help="Timed calls of each side (default 40 on cuda, 100 on cpu; fewer, at least 10, for inputs "
        "too large to keep that many calls' data in memory).",
    ),
]
UnsafeOpt = Annotated[
    bool, typer.Option("--unsafe-no-sandbox", help="Run the agent's shell without bubblewrap (DANGEROUS).")
]

# The review of a session's kernel (optimize, demo).
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Apply the best kernel without asking.")]
NoApplyOpt = Annotated[
    bool, typer.Option("--no-apply", help="Show the result and the diff, never write into the repository.")
]
PatchOpt = Annotated[Optional[Path], typer.Option("--patch", help="Save the diff as a git-apply-able patch FILE.")]
NoCommitOpt = Annotated[bool, typer.Option("--no-commit", help="Write the files but do not commit them.")]
AllowDirtyOpt = Annotated[
    bool, typer.Option("--allow-dirty", help="Apply even if the target file has uncommitted changes.")
]
PlainOpt = Annotated[
    bool,
    typer.Option(
        "--plain",
        help="Linear text output instead of the terminal app: for screen readers, CI logs and terminals that cannot show it.",
    ),
]
BatchOpt = Annotated[
    bool, typer.Option("--batch", help="No prompts and no live display (with --json: one JSON object on stdout).")
]

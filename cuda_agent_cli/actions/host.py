"""Compile, Verify and Profile: the agent's only way to reach the locked harness.

Each is a thin call into a HarnessPort; the model gets the harness's own summary with the
reward, and the HarnessResult travels in `harness_result`, as its record keeps it
(`HarnessResult.as_recorded`), for the loop, the UIs and the transcript.
"""

from __future__ import annotations

from typing import Any, Protocol

from cuda_agent_cli.actions.toolbox import ActionContext, ToolResult, error
from cuda_agent_cli.errors import CudaAgentError
from cuda_agent_cli.harness_result import HarnessResult


class HarnessPort(Protocol):
    def compile(self) -> HarnessResult: ...

    def verify(self) -> HarnessResult: ...

    def profile(self) -> HarnessResult: ...


_EMPTY: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


def _failed(result: HarnessResult, step: str) -> bool:
    if step == "compile":
        return not result.compiled
    return not (result.compiled and result.correct)


class _HostTool:
    name = ""
    step = ""
    writes = False
    runs_commands = False
    description = ""
    input_schema: dict[str, Any] = _EMPTY

    def run(self, args: dict[str, Any], ctx: ActionContext) -> ToolResult:
        harness = ctx.harness
        if harness is None:
            return error(f"{self.name} is not available in this session (no harness attached)")
        try:
            outcome: HarnessResult = getattr(harness, self.step)()
        except CudaAgentError as exc:
            return error(f"{self.name} could not run: {exc.one_line()}")
        # The summary reads what the record leaves out (compiler log, stage seconds); the rest
        # of the session reads the result as a resumed session will.
        text = outcome.summary()
        result = outcome.as_recorded()
        if result.reward is not None and "reward" not in text.lower():
            text += f"\nreward: {result.reward}"
        return ToolResult(text, _failed(result, self.step), harness_result=result)


class Compile(_HostTool):
    name = "Compile"
    step = "compile"
    description = (
        "Builds the kernels in kernels/ together with the locked binding into the extension "
        "module cuda_extension, using the harness's own compiler flags. Returns the compiler "
        "errors, if any. Takes no parameters. Use it after every kernel change, before Verify."
    )


class Verify(_HostTool):
    name = "Verify"
    step = "verify"
    description = (
        "Compiles, then checks model_new.py's ModelNew against the reference Model on fresh "
        "random inputs (several seeds; every output's error from a float64 reference at most 8x "
        "eager's own at the module's dtype), its parameters and buffers after each call, calls "
        "after the weights change in place, plus the anti-cheating checks (no torch fallbacks "
        "under the strict policy, no aliasing or mutating inputs, kernels must really run, no "
        "library compute under any name). Returns each check's result and the reward (-1 on any "
        "failure). Takes no parameters."
    )


class Profile(_HostTool):
    name = "Profile"
    step = "profile"
    description = (
        "Verifies, then times ModelNew against eager PyTorch and torch.compile on the same "
        "inputs (warm-up, cache flush, median of many calls) and returns the timings, the "
        "speedups and the reward: 3 if more than 5% faster than both baselines, 2 if faster "
        "than eager only, 1 if correct but not faster, -1 if it fails. Takes no parameters. "
        "The best profiled candidate of the session is the one offered to the user."
    )


HOST_TOOLS = (Compile, Verify, Profile)

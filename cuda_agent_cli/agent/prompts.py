"""The system prompt (SKILL.md plus this session's facts) and the task message."""

from __future__ import annotations

from pathlib import Path

from cuda_agent_cli.config import Policy
from cuda_agent_cli.resources import skill_path

PREAMBLE = (
    "You are cuda-agent, an expert CUDA and C++ performance engineer working inside a sandboxed "
    "workspace. You act only through the tools you are given; file paths are relative to the "
    "workspace root unless absolute. Think briefly, then act: every turn should make progress."
)


def load_skill(path: Path | None = None) -> str:
    return (path or skill_path()).read_text(encoding="utf-8")


def build_system_prompt(
    *,
    device: str,
    policy: Policy,
    gpu: str | None = None,
    extra_rules: str | None = None,
    skill_text: str | None = None,
) -> str:
    """SKILL.md is the core; the session block says which device, GPU and policy apply."""
    skill = skill_text if skill_text is not None else load_skill()
    facts = [f"- device: {device}" + (f" ({gpu})" if gpu else ""), f"- policy: {policy}"]
    if device == "cpu":
        facts.append("- there is no GPU: write C++ kernels in kernels/*.cpp (see 'The CPU device').")
    block = "# This session\n" + "\n".join(facts)
    if extra_rules:
        block += "\n\n" + extra_rules.strip()
    return f"{PREAMBLE}\n\n{skill.strip()}\n\n{block}\n"


def task_message(target: str, reference_source: str | None = None, notes: str | None = None) -> str:
    """The first user message: what to optimize, with the reference inlined to save a turn."""
    parts = [
        f"Optimize `{target}`: write ModelNew in model_new.py backed by kernels in kernels/, "
        "then Compile, Verify and Profile until it is as fast as you can make it."
    ]
    if reference_source:
        parts.append("The reference (model.py, read-only):\n```python\n" + reference_source.rstrip() + "\n```")
    if notes:
        parts.append(notes.strip())
    return "\n\n".join(parts)


CHAT_PREAMBLE = (
    "You are cuda-agent, an expert CUDA and C++ performance engineer, in a conversation with a "
    "developer about their repository. You act only through the tools you are given; file paths "
    "are relative to the repository root unless absolute. Your shell commands run in a sandbox "
    "with no network; every file write and command may need the user's approval, and a refusal "
    "comes back as the tool's result: follow any instruction it carries. To write, verify and "
    "time a kernel for one module, tell the user to run `/optimize path/to/file.py::ClassName` "
    '(optionally with `--inputs "x=float32[8,128]"`): that runs the locked harness and shows a '
    "review before anything is written. Never claim a speedup the harness did not measure."
)


def chat_system_prompt(*, repo: str, mode: str, device: str | None = None) -> str:
    """The system prompt of `cuda-agent chat` over the repository at `repo`."""
    facts = [f"- repository: {repo}", f"- permission mode: {mode}"]
    if device:
        facts.append(f"- device: {device}")
    return f"{CHAT_PREAMBLE}\n\n# This session\n" + "\n".join(facts) + "\n"

"""The system prompt (SKILL.md plus this session's facts) and the task message."""

from __future__ import annotations

from pathlib import Path

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
    policy: str,
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
    parts = [f"Optimize `{target}`: write ModelNew in model_new.py backed by kernels in kernels/, "
             "then Compile, Verify and Profile until it is as fast as you can make it."]
    if reference_source:
        parts.append("The reference (model.py, read-only):\n```python\n" + reference_source.rstrip() + "\n```")
    if notes:
        parts.append(notes.strip())
    return "\n\n".join(parts)

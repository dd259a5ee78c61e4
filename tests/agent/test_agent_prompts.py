"""The system prompt: SKILL.md (shipped with the package) plus the session's facts."""

from __future__ import annotations

from cuda_agent_cli.agent.prompts import build_system_prompt, load_skill, task_message

CHECKS = (
    "lock",
    "static",
    "compile",
    "import",
    "output_type",
    "aliasing",
    "inputs_unchanged",
    "correctness",
    "relative_error",
    "nonconstant",
    "determinism",
    "precision_flags",
    "torch_ops",
    "extension_kernel",
    "timed_outputs",
    "harness_integrity",
    "threads",
    "crash",
    "timeout",
    "speedup_review",
)


def test_skill_explains_every_harness_check_and_the_binding_interface():
    skill = load_skill()
    missing = [c for c in CHECKS if f"`{c}`" not in skill]
    assert not missing, f"SKILL.md does not explain: {missing}"
    for needle in (
        '#include "../binding_registry.h"',
        "REGISTER_BINDING",
        "void register_fn(pybind11::module&)",
        "import cuda_extension",
        "state_dict",
        "**strict**",
        "**hybrid**",
        "| 3 |",
        "| -1 |",
        "Hopper",
        "wgmma",
        "TMA",
        "mma.sync",
        "The CPU device",
    ):
        assert needle in skill, needle


def test_system_prompt_is_skill_plus_session_facts():
    prompt = build_system_prompt(device="cuda", policy="hybrid", gpu="NVIDIA H200", skill_text="SKILL BODY")
    assert "SKILL BODY" in prompt
    assert prompt.rstrip().endswith("- policy: hybrid")
    assert "- device: cuda (NVIDIA H200)" in prompt
    cpu = build_system_prompt(device="cpu", policy="strict")
    assert "kernels/*.cpp" in cpu.split("# This session")[1]
    assert load_skill().strip() in cpu


def test_task_message_inlines_the_reference():
    msg = task_message("blocks.py::Block", "class Model:\n    pass\n", "Inputs: x float32[8, 64].")
    assert "`blocks.py::Block`" in msg and "```python\nclass Model:\n    pass\n```" in msg
    assert msg.endswith("Inputs: x float32[8, 64].")

"""Where the shipped files are: found through importlib.resources, so a plain wheel works."""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

_ASSETS = "cuda_agent_cli.assets"


def _dir(name: str) -> Path:
    found: Traversable = resources.files(f"{_ASSETS}.{name}")
    # Installed wheels and editable installs both give real directories; the harness needs
    # real paths because it runs these scripts in subprocesses.
    path = Path(str(found))
    if not path.is_dir():
        raise FileNotFoundError(f"packaged directory {name!r} is missing from the installation")
    return path


def tools_dir() -> Path:
    """The pristine, locked harness scripts (compile, verify, profile)."""
    return _dir("tools")


def sandbox_template_dir() -> Path:
    """The workspace template copied per task (binding.cpp, binding_registry.h, kernels/)."""
    return _dir("sandbox")


def skill_path() -> Path:
    """The agent's skill text, the core of its system prompt."""
    return _dir("skills") / "SKILL.md"

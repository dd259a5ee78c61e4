"""Shared fixtures: harness tests use one private cache dir per test session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Profiles in the suite time eager and default torch.compile only: max-autotune's compilation
# would be paid in every test that profiles, and tests that are about the extra baselines ask for
# them (Harness(baselines=...)). A run that sets the variable keeps its own choice.
os.environ.setdefault("CUDA_AGENT_BASELINES", "compile")


@pytest.fixture(scope="session")
def harness_cache_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the whole run, shared by its worker processes when tests run in parallel
    (pytest-xdist): builds of the same sources (content-addressed objects, the loaders'
    extensions, torch.compile's artifacts) are paid for once, and concurrent builds of one
    extension take cpp_extension's lock."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    root = base / "cuda-agent-cache"
    root.mkdir(exist_ok=True)
    return root


@pytest.fixture
def harness_cache(harness_cache_root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the harness's cache dir (builds, baselines, worker logs) at the session cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(harness_cache_root))
    return harness_cache_root / "cuda-agent"

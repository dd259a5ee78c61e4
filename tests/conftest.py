"""Shared fixtures: harness tests use one private cache dir per test session."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def harness_cache_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # One cache for the whole run: the torch.compile baseline and the worker are paid for once.
    return tmp_path_factory.mktemp("cuda-agent-cache")


@pytest.fixture
def harness_cache(harness_cache_root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the harness's cache dir (builds, baselines, worker logs) at the session cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(harness_cache_root))
    return harness_cache_root / "cuda-agent"

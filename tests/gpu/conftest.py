"""What the GPU tier's test modules share."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def gpu(harness_cache_root: Path):
    """A CUDA GPU torch can see (else the test is skipped), and the run's shared harness cache."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(harness_cache_root))
        yield

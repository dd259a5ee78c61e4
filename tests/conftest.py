"""Shared fixtures: harness tests use one private cache dir per test session."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# Profiles in the suite time eager and default torch.compile only: max-autotune's compilation
# would be paid in every test that profiles, and tests that are about the extra baselines ask for
# them (Harness(baselines=...)). A run that sets the variable keeps its own choice.
os.environ.setdefault("CUDA_AGENT_BASELINES", "compile")


def _share_the_cores() -> None:
    """torch's threads in every process a test worker starts (its own, the CLI's, the
    deployment probe's, a capture's program): the worker's share of the cores. With all of them
    in each process while another worker keeps one busy, an OpenMP region's threads spin at its
    barrier for a thread that has no core: a process took several times its CPU that way, and
    the suite's two workers about a sixth more time (docs/benchmarks.md, "Threads per worker").
    The harness sets its own timed processes' threads and passes none of this on."""
    from cuda_agent_cli.machine import usable_cores

    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    if workers > 1:
        os.environ.setdefault("OMP_NUM_THREADS", str(max(1, usable_cores() // workers)))


_share_the_cores()

_BUILD_PCH = """
import sys
sys.path.insert(0, sys.argv[1])
import compile_kernels
result = compile_kernels.run_pch_job({"device": "cpu", "pch_dir": sys.argv[2]})
sys.exit(0 if result.get("ok") else 1)
"""


# Kept between runs: a second run of the suite links what the first compiled.
STORE_DAYS = 14


def build_store() -> Path | None:
    """Where the suite keeps compiled kernel objects, the precompiled header and torch.compile's
    caches of the baselines between its runs
    (CUDA_AGENT_TEST_STORE, else the user's cache; "off" keeps them per run). All are named by
    the digest of everything that went into them (sources, headers, flags, compiler, torch
    build), so a build never links an object made from anything else; a test about compiling
    itself uses a folder of its own."""
    value = os.environ.get("CUDA_AGENT_TEST_STORE", "")
    if value == "off":
        return None
    if value:
        return Path(value)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cuda-agent-tests"


def _prune(store: Path) -> None:
    """Forget what no run made in the last STORE_DAYS days (objects are never rewritten)."""
    import shutil
    import time

    limit = time.time() - STORE_DAYS * 86400
    per_device = (store / "objects", store / "pch", store / "compile", store / "inline")
    entries = [e for folder in per_device for device in folder.glob("*") for e in device.glob("*")]
    for entry in entries + list((store / "extensions").glob("*")):
        try:
            if entry.stat().st_mtime < limit:
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        except OSError:
            pass


def _compile_own_bytecode() -> None:
    """The suite starts some hundreds of `python -m cuda_agent_cli` processes; where the
    environment forbids writing bytecode (PYTHONDONTWRITEBYTECODE, set on some CI images), each
    compiled cuda-agent's modules from source again, about 0.3 s of CPU apiece. Compiled once
    here, they are read by every one (the modules the tests write and edit keep the
    environment's rule: a rewrite within the second of an import could otherwise run stale
    bytecode)."""
    import compileall

    compileall.compile_dir(str(Path(__file__).resolve().parents[1] / "cuda_agent_cli"), quiet=1)


def pytest_configure(config: pytest.Config) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        _compile_own_bytecode()
    store = build_store()
    if store is None or os.environ.get("PYTEST_XDIST_WORKER"):
        # xdist's workers inherit the controller's environment
        return
    try:
        (store / "objects").mkdir(parents=True, exist_ok=True)
    except OSError:
        return
    _prune(store)
    os.environ.setdefault("CUDA_AGENT_OBJECTS_DIR", str(store / "objects"))
    os.environ.setdefault("CUDA_AGENT_PCH_DIR", str(store / "pch"))
    # torch.compile's caches for the baselines (named by torch from the graph, its inputs, the
    # config and torch's build): the eager models' compiled code is made once, not every run
    os.environ.setdefault("CUDA_AGENT_COMPILE_CACHE", str(store / "compile"))
    # The loaders' extensions (named by the digest of their sources, the loader's build recipe
    # and torch's build) and single-file candidates' load_inline builds (rebuilt by torch when
    # their sources change): each applied demo or KernelBench pair of a run, and of the next,
    # links what the first one built. Tests about building pass folders of their own.
    os.environ.setdefault("CUDA_AGENT_KERNEL_CACHE", str(store / "extensions"))
    os.environ.setdefault("CUDA_AGENT_INLINE_DIR", str(store / "inline"))


def pytest_collection_finish(session: pytest.Session) -> None:
    """A run with tests that build kernels shares one precompiled torch/extension.h, made before
    the first of them (about 45 s on two cores; each kernel binding then compiles in about half
    its time), and kept for the next run where the build store is on. Every harness of the run
    finds it through CUDA_AGENT_PCH_DIR, the CLI's subprocesses too, so none starts a build of
    its own beside timed work."""
    if not any(item.get_closest_marker("integration") for item in session.items):
        return
    from cuda_agent_cli import resources

    if os.environ.get("CUDA_AGENT_PCH_DIR"):
        root = Path(os.environ["CUDA_AGENT_PCH_DIR"])
    else:
        base = session.config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
        if os.environ.get("PYTEST_XDIST_WORKER"):
            base = base.parent
        root = base / "cuda-agent-pch"
        os.environ["CUDA_AGENT_PCH_DIR"] = str(root)
    subprocess.run(
        [sys.executable, "-c", _BUILD_PCH, str(resources.tools_dir()), str(root / "cpu")],
        timeout=900,
        check=False,
    )


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

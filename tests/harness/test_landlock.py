"""The Landlock layer in a forked child: what a confined candidate process may and may not write."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from cuda_agent_cli.assets.tools import landlock


def _in_confined_child(allowed: Path, attempt) -> int:
    """Fork, confine writes to `allowed`, run `attempt()`; the child's exit code is the answer."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 3
        try:
            if landlock.restrict_writes([str(allowed)]).startswith("Landlock"):
                code = attempt()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.WEXITSTATUS(status)


@pytest.fixture
def confinable() -> None:
    if landlock.abi_version() < 1:
        pytest.skip("this kernel has no Landlock")


def _writes(path: Path) -> int:
    try:
        path.write_text("x")
        return 0
    except PermissionError:
        return 1


def test_writes_land_only_beneath_the_allowed_folder(confinable, tmp_path: Path) -> None:
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    assert _in_confined_child(inside, lambda: _writes(inside / "ok.txt")) == 0
    assert _in_confined_child(inside, lambda: _writes(outside / "planted.json")) == 1
    assert not (outside / "planted.json").exists()
    assert _in_confined_child(inside, lambda: _writes(Path(os.devnull))) == 0


def test_the_process_may_still_name_its_threads(confinable, tmp_path: Path) -> None:
    """The CUDA driver renames its helper threads through /proc; refused, it cannot start."""

    def rename_a_thread() -> int:
        tids: list[int] = []
        done = threading.Event()
        t = threading.Thread(target=lambda: (tids.append(threading.get_native_id()), done.wait()))
        t.start()
        while not tids:
            pass
        try:
            Path(f"/proc/self/task/{tids[0]}/comm").write_text("helper")
            return 0
        except PermissionError:
            return 1
        finally:
            done.set()
            t.join()

    assert _in_confined_child(tmp_path, rename_a_thread) == 0


def test_a_confined_process_cannot_signal_others(confinable, tmp_path: Path) -> None:
    """Where Landlock scopes signals (ABI 6), the candidate cannot stop the baselines it is timed
    beside, or any other process outside its own domain; its own children it still may."""
    import signal
    import time

    if landlock.abi_version() < 6:
        pytest.skip("this kernel's Landlock does not scope signals")
    victim = os.fork()
    if victim == 0:  # pragma: no cover - runs in the child
        time.sleep(30)
        os._exit(0)

    def stop_the_victim() -> int:
        try:
            os.kill(victim, signal.SIGSTOP)
            return 0
        except PermissionError:
            return 1

    def signal_own_child() -> int:
        child = os.fork()
        if child == 0:  # pragma: no cover
            time.sleep(30)
            os._exit(0)
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        return 0

    try:
        assert _in_confined_child(tmp_path, stop_the_victim) == 1
        assert _in_confined_child(tmp_path, signal_own_child) == 0
    finally:
        os.kill(victim, signal.SIGKILL)
        os.waitpid(victim, 0)

"""Locked: the processes below the controller, its executors and whatever they started: its
subreaper, the descendants it finds in /proc, the strays a candidate left running, and the kill
of everything left when the evaluation ends (docs/security.md, "Jobs die whole").
"""

from __future__ import annotations

import os
import signal
import time

import wire


def signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _children(pid: int) -> list[int] | None:
    """Direct children from /proc/PID/task/*/children (None where the kernel lacks the file)."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found.extend(int(x) for x in f.read().split())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            continue
    return found


def _descendants(root: int) -> list[int]:
    out: list[int] = []
    todo = [root]
    while todo:
        kids = _children(todo.pop())
        if kids is None:
            return _descendants_by_scan(root)
        out.extend(kids)
        todo.extend(kids)
    return out


def _descendants_by_scan(root: int) -> list[int]:
    from worker_common import children_by_parent

    children = children_by_parent()
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def below_but(pids: tuple[int, ...], trees: tuple[int, ...] = ()) -> list[int]:
    """Processes below this controller (their subreaper), but `pids` and `trees` with everything
    below them."""
    keep = set(pids) | set(trees) | {d for pid in trees for d in _descendants(pid)}
    return [pid for pid in _descendants(os.getpid()) if pid not in keep]


def stray_processes(cand: int, base: int | None) -> list[int]:
    """What the candidate (process `cand`) started and left running: processes below this
    controller that are neither the candidate's own nor the baselines' (`base` and what is below
    it). Work done in another process is on neither the candidate's clocks nor its thread
    count."""
    return below_but((cand,), (base,) if base is not None else ())


def strays_error(strays: list[int], when: str) -> wire.WindowError:
    names = []
    for pid in strays[:3]:
        try:
            with open(f"/proc/{pid}/comm") as f:
                names.append(f"{pid} ({f.read().strip()})")
        except OSError:
            names.append(str(pid))
    return {
        "error": f"the candidate started {len(strays)} process(es) still running {when}: "
        f"{', '.join(names)}; a kernel must do its work in the candidate's own process",
        "strays": len(strays),
    }


def become_subreaper() -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def kill_descendants() -> None:
    """Whatever the executors started and left behind dies with the evaluation."""
    for _ in range(20):
        left = _descendants(os.getpid())
        if not left:
            return
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for pid in left:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
        time.sleep(0.002)

"""Locked: the trusted process of one evaluation. It runs no candidate code and no model.

It forks the executors (tools/executor.py) before CUDA is initialized anywhere, talks to each
over a channel made before the fork, and decides everything a candidate could want to steer:

- which calls are made, with which input set and which seed, sent only when a block starts;
- the clock: every block of calls is timed here, from the request that carries its seeds to
  the reply, sent after the executor's last device-wide synchronize; and the candidate's
  processes are stopped (SIGSTOP) while a baseline block runs, so its threads can neither load
  the machine nor see the baselines' calls;
- which timed outputs are looked at: chosen at random after every timed call has returned and
  committed to its output's fingerprint;
- the load on the machine before and during the window, from /proc, for the record.

Eager, torch.compile and the candidate are timed side by side: rounds of one block each, in a
rotating order, all on the same inputs. What it hands back are raw numbers; the harness turns
them into times, ratios and intervals (harness/scoring.py).
"""

from __future__ import annotations

import math
import os
import secrets
import signal
import statistics
import sys
import time
import traceback
from typing import Any, Callable

import channel
import wire

_perf_ns = time.perf_counter_ns
# Call ids: verification calls count up from 0, timed ones from here (warm-up ones beyond).
TIMED_BASE = 1000
WARM_BASE = 100000
# The compiled baselines in the window's order (tools/executor.py, COMPILED_SIDES).
BASELINE_SIDES = ("compile", "autotune", "graphs")
# A trusted block (eager, torch.compile, the baselines' null calls) whose lead-ins or flushes took
# more than DEVICE_SLOW times their calibrated time on the median (its `device_ratio`) is made
# again, up to TRUSTED_RETRIES times, after a pause of RETRY_PAUSE_S (growing) for what was left
# on the device to drain.
DEVICE_SLOW = 1.25
TRUSTED_RETRIES = 3
RETRY_PAUSE_S = 0.05
# Bursts (tools/timing.py): where the candidate's median claim is below BURST_CLAIM_MOST_US, the
# window is followed by `bursts` rounds, each a burst of the candidate's calls, one of its
# process's null calls and one of the baselines' process's null calls, in turn. A burst has as
# many calls as take about BURST_TARGET_US by the claim (with BURST_HOST_US of host work a
# call), within [BURST_LEAST, BURST_MOST] and as many as the spec's `burst_bytes` of inputs and
# outputs hold (BURST_BYTES where it says none); the outputs kept to be checked take at most its
# `burst_check_bytes` in all.
BURST_CLAIM_MOST_US = 2000.0
BURST_TARGET_US = 20000.0
BURST_HOST_US = 20.0
BURST_LEAST, BURST_MOST = 4, 256
BURST_BYTES = 1 << 30
BURST_BASE = 200000  # burst call ids count up from here
# What the candidate's process committed to for each call (its output's fingerprint, the call's
# evidence), by call id.
Commits = dict[int, tuple[wire.Fingerprint, wire.CallEvidence]]


class _Peer:
    def __init__(self, name: str, pid: int, chan: channel.Channel, timeout: float) -> None:
        self.name, self.pid, self.chan, self.timeout = name, pid, chan, timeout
        self.exit: str | None = None

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        self.chan.send(request)
        return self.chan.recv(self.timeout)

    def stop(self, spare: tuple[int, ...] = ()) -> list[int]:
        """Stop it and everything else this controller has below it (what it started, and what
        that left behind, reparented here: the controller is their subreaper), but `spare`."""
        _signal_group(self.pid, signal.SIGSTOP)
        stopped = _below_but((self.pid,), spare)
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGSTOP)
            except (ProcessLookupError, PermissionError):
                pass
        return stopped

    def cont(self, stopped: list[int] = ()) -> None:  # type: ignore[assignment]
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except (ProcessLookupError, PermissionError):
                pass
        _signal_group(self.pid, signal.SIGCONT)

    def end(self) -> str:
        """Kill what is left of it and say how it ended."""
        _signal_group(self.pid, signal.SIGCONT)
        deadline = time.monotonic() + 2.0
        status = None
        while time.monotonic() < deadline:
            done, st = os.waitpid(self.pid, os.WNOHANG)
            if done:
                status = st
                break
            time.sleep(0.01)
        _signal_group(self.pid, signal.SIGKILL)
        if status is None:
            try:
                _, status = os.waitpid(self.pid, 0)
            except ChildProcessError:
                status = 0
        self.chan.close()
        if os.WIFSIGNALED(status):
            try:
                name = signal.Signals(os.WTERMSIG(status)).name
            except ValueError:
                name = f"signal {os.WTERMSIG(status)}"
            self.exit = f"was killed by {name}"
        else:
            self.exit = f"exited with status {os.WEXITSTATUS(status)}"
        return self.exit


class _Service(_Peer):
    """The baselines service the worker lent this evaluation: used, never stopped or killed."""

    def __init__(self, pid: int, fds: list[int], timeout: float) -> None:
        super().__init__("baselines", pid, channel.Channel(int(fds[0]), int(fds[1])), timeout)
        self.nonce = secrets.token_hex(8)
        self.finished = False
        self.broken = False  # a request failed: the worker then ends it rather than lend it again

    def open_round(self, spec: dict) -> None:
        keys = ("device", "reference", "inputs_dir", "seeds", "timed_sets", "threads", "flush_bytes", "plan")
        self.chan.send({"op": "round", "nonce": self.nonce, "spec": {k: spec[k] for k in keys if k in spec}})

    def ready(self) -> dict:
        """Its answer to this round, past whatever an earlier evaluation left unread."""
        try:
            while True:
                message = self.chan.recv(self.timeout)
                if message.get("nonce") == self.nonce:
                    return message
        except channel.ChannelClosed:
            self.broken = True
            raise

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("op") == "finish":
            self.finished = True
        try:
            return super().ask(request)
        except channel.ChannelClosed:
            self.broken = True
            raise

    def end(self) -> str:
        if not self.finished:
            try:  # lets it drop this round's inputs; its answer is skipped by the next round
                self.chan.send({"op": "finish"})
            except channel.ChannelClosed:
                pass
        self.exit = "kept for the next evaluation"
        return self.exit


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _max_fd() -> int:
    try:
        return os.sysconf("SC_OPEN_MAX")
    except (ValueError, OSError):
        return 4096


def _spawn(name: str, target: Callable[[dict, channel.Channel], None], spec: dict, timeout: float) -> _Peer:
    parent_ends, child_ends = channel.pipe_pair()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setpgid(0, 0)  # its own group: stopped and killed as a whole
            keep = sorted({0, 1, 2, *child_ends})
            # Only its own channel and the log: not the controller's result pipe, not the
            # other executor's channel.
            low = 3
            for fd in keep[3:] + [_max_fd()]:
                if fd > low:
                    os.closerange(low, fd)
                low = fd + 1
            target(spec, channel.Channel(*child_ends))
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(child_ends[0])
    os.close(child_ends[1])
    return _Peer(name, pid, channel.Channel(*parent_ends), timeout)


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


def _below_but(pids: tuple[int, ...], trees: tuple[int, ...] = ()) -> list[int]:
    """Processes below this controller (their subreaper), but `pids` and `trees` with everything
    below them."""
    keep = set(pids) | set(trees) | {d for pid in trees for d in _descendants(pid)}
    return [pid for pid in _descendants(os.getpid()) if pid not in keep]


def _strays(cand: _Peer, base: Any) -> list[int]:
    """What the candidate started and left running: processes below this controller that are
    neither the candidate's own nor the baselines'. Work done in another process is on neither
    the candidate's clocks nor its thread count."""
    return _below_but((cand.pid,), (base.pid,) if base is not None else ())


def _strays_error(strays: list[int], when: str) -> wire.WindowError:
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


def _become_subreaper() -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def _kill_descendants() -> None:
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


def _cpu_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine since boot."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


def _process_jiffies(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                parts = f.read().rsplit(")", 1)[1].split()
            # utime, stime, and the children's when they were reaped.
            total += int(parts[11]) + int(parts[12]) + int(parts[13]) + int(parts[14])
        except (OSError, IndexError, ValueError):
            pass
    return total


class LoadMeter:
    """Cores kept busy by anything but this evaluation's own processes.

    Only the controller and the executors themselves count as its own: a process one of them
    started and left running is load like any other.
    """

    def __init__(self, pids: list[int]) -> None:
        self.pids = [os.getpid(), *pids]
        self._start: tuple[int, int, int] | None = None

    def _ours(self) -> int:
        return _process_jiffies(self.pids)

    def start(self) -> None:
        busy, total = _cpu_jiffies()
        self._start = (busy, total, self._ours())

    def foreign_cores(self) -> float:
        assert self._start is not None
        busy, total = _cpu_jiffies()
        ours = self._ours()
        b0, t0, o0 = self._start
        cores = os.cpu_count() or 1
        elapsed = (total - t0) / cores
        if elapsed <= 0:
            return 0.0
        return max(0.0, ((busy - b0) - (ours - o0)) / elapsed)


class Pinning:
    """Every thread of some processes held to a set of CPUs, and what to put back: each thread's
    own affinity from before, and for threads started meanwhile, their process's."""

    def __init__(self) -> None:
        self.processes: dict[int, set[int]] = {}
        self.threads: dict[int, set[int]] = {}

    def pin(self, pids: list[int], cpus: set[int]) -> bool:
        """True when every thread of every process could be pinned."""
        whole = True
        for pid in pids:
            try:
                self.processes[pid] = os.sched_getaffinity(pid)
                tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
            except OSError:
                whole = False
                continue
            for tid in tids:
                try:
                    had = os.sched_getaffinity(tid)
                    os.sched_setaffinity(tid, cpus)
                    self.threads[tid] = had
                except OSError:
                    whole = False
        return whole

    def restore(self) -> None:
        for pid, cpus in self.processes.items():
            try:
                tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
            except OSError:
                continue
            for tid in tids:
                try:
                    os.sched_setaffinity(tid, self.threads.get(tid, cpus))
                except OSError:
                    continue


def _callers() -> list[int]:
    """This process, the zygote that forked it and the zygote's parent (the harness's caller)."""
    from worker_common import parent_of

    found = [os.getpid()]
    zygote = os.getppid()
    caller = parent_of(zygote)
    for pid in (zygote, caller):
        if pid is not None and pid > 1:
            found.append(pid)
    return found


def _idle_load(pids: list[int], seconds: float = 0.2) -> float:
    meter = LoadMeter(pids)
    meter.start()
    time.sleep(seconds)
    return meter.foreign_cores()


def run_evaluate_job(spec: dict) -> wire.EvaluateResult:
    import executor

    result: wire.EvaluateResult = {"phases": {}}
    timeout = float(spec.get("call_timeout", 300))
    timed = spec.get("timing")
    n_verify = int(spec["n"])
    verify_calls: list[wire.Call] = [
        {"id": i, "model": i, "set": i, "seed": secrets.randbits(62)} for i in range(n_verify)
    ]
    again: wire.Call = {**verify_calls[0], "id": n_verify}  # the same call again: determinism
    result["verify_calls"] = verify_calls + [again]
    peers: list[_Peer] = []
    _become_subreaper()
    mark = time.perf_counter()
    try:
        base: _Peer | None = None
        if timed:
            # Started first and ready before any candidate code exists: nothing of the candidate
            # can run while the reference builds its models.
            lent = spec.get("baselines_service")
            if lent:
                base = _Service(int(lent["pid"]), lent["fds"], timeout)
                base.open_round(spec)
            else:
                base = _spawn("baselines", executor.serve_baselines, spec, timeout)
            peers.append(base)
        if spec.get("go_file"):
            # Prepared beside the build; the candidate exists only once the build is done.
            go = _wait_for(spec["go_file"], float(spec.get("go_timeout", 3600)))
            if not go.get("compiled"):
                result["stage"] = "not_compiled"
                return result
            spec = {**spec, "module_dir": go.get("module_dir")}
        cand = _spawn("candidate", executor.serve_candidate, spec, timeout)
        peers.append(cand)
        ready = cand.chan.recv(timeout)
        if not ready.get("ok"):
            result["claims"] = ready.get("claims") or {}
            result["stage"] = "import"
            return result
        built = cand.ask({"op": "build", "models": list(range(n_verify))})
        if not built.get("ok"):
            result["claims"] = _finish(cand)
            result["stage"] = "run"
            return result
        result["phases"]["import"] = round(time.perf_counter() - mark, 4)
        mark = time.perf_counter()
        reply, _ = _make_calls(cand, {"op": "calls", "calls": result["verify_calls"]})
        result["phases"]["seeds"] = round(time.perf_counter() - mark, 4)
        if not reply.get("ok"):
            result["claims"] = _finish(cand)
            result["stage"] = "run"
            return result
        commits: Commits = {
            c["id"]: (fp, ev)
            for c, fp, ev in zip(result["verify_calls"], reply.get("fingerprints", []), reply.get("evidence", []))
        }
        cand.ask({"op": "checkpoint"})
        if spec["device"] == "cuda":
            mark = time.perf_counter()
            found = cand.ask({"op": "kernels"})
            result["cuda_kernels"] = found.get("names")
            result["cuda_kernels_error"] = found.get("error")
            result["phases"]["profiler"] = round(time.perf_counter() - mark, 4)
        checked: list[wire.Call] = []
        if timed and base is not None:
            cand.ask({"op": "checkpoint", "stage": "before_timing"})
            mark = time.perf_counter()
            window = _time_side_by_side(spec, cand, base, commits)
            if "error" in window:
                result["claims"] = _finish(cand)
                result.update(window)
                result["stage"] = "time"
                return result
            result["timing"] = window
            result["phases"]["baselines_wait"] = window.get("baselines_wait_s", 0.0)
            result["phases"]["baselines_prepare"] = (window.get("baselines_ready") or {}).get("prepare_s") or 0.0
            timed_calls = window.pop("calls")
            burst_checked = window.pop("burst_calls", [])
            # Chosen now, after every timed call has returned and committed to its output: as many
            # as a kernel wrong on one call in `one_in` needs to be caught with `detect` certainty.
            rng = secrets.SystemRandom()
            wanted, miss = checks_needed(len(timed_calls), int(spec.get("one_in", 5)), float(spec.get("detect", 0.99)))
            wanted = max(wanted, min(int(spec.get("checks", 3)), len(timed_calls)))
            checked = sorted(rng.sample(timed_calls, wanted), key=lambda c: c["id"])
            result["detection"] = {
                "checked": wanted,
                "timed": len(timed_calls),
                "one_in": int(spec.get("one_in", 5)),
                "probability": round(1.0 - miss, 4),
            }
            if "burst_detection" in window:
                result["detection"]["bursts"] = window.pop("burst_detection")
            checked = sorted(checked + burst_checked, key=lambda c: c["id"])
            result["phases"]["timing"] = round(time.perf_counter() - mark, 4)
        result["checked_calls"] = checked
        mark = time.perf_counter()
        ids = [c["id"] for c in result["verify_calls"] + checked]
        revealed = cand.ask({"op": "reveal", "ids": ids})
        if not revealed.get("ok"):
            result["claims"] = _finish(cand)
            result["stage"] = "run"
            return result
        result["commits"] = {
            str(i): {"fingerprint": commits[i][0], "evidence": commits[i][1]} for i in ids if i in commits
        }
        result["phases"]["timed_saves"] = round(time.perf_counter() - mark, 4)
        result["claims"] = _finish(cand, bandwidth=bool(timed))
        if base is not None:
            result["baselines_info"] = base.ask({"op": "finish"}).get("info", {})
        result["stage"] = "done"
        return result
    except channel.ChannelClosed as exc:
        result["stage"] = result.get("stage") or "run"
        result["channel_error"] = str(exc)
        result["timed_out"] = exc.timed_out
        return result
    finally:
        for peer in peers:
            result.setdefault("exits", {})[peer.name] = peer.end()
            if isinstance(peer, _Service) and peer.broken:
                result["service_broken"] = True
        _kill_descendants()


def _make_calls(peer: _Peer, request: dict) -> tuple[dict, float]:
    """Ask for a block of calls and time it here, from the moment its seeds leave this process
    to the reply, sent after the executor's last device-wide synchronize (µs). Nothing of the
    block can be known before the clock starts, and nothing of it can run after it stops."""
    t0 = _perf_ns()
    peer.chan.send(request)
    reply = peer.chan.recv(peer.timeout)
    return reply, (_perf_ns() - t0) / 1000.0


def process_cpu_clock(pid: int) -> int | None:
    """The kernel's CPU-time clock of process `pid` (all its threads, those that ended too), or
    None where it cannot be read. What it counts is work the process did, whoever ran beside
    it: another program taking the core from it moves this process's wall time, not this."""
    import ctypes

    try:
        clock = ctypes.c_int()
        if ctypes.CDLL(None, use_errno=True).clock_getcpuclockid(int(pid), ctypes.byref(clock)) != 0:
            return None
        time.clock_gettime_ns(clock.value)
        return int(clock.value)
    except (OSError, AttributeError, ValueError):
        return None


def _cpu_us(clock: int | None) -> float | None:
    if clock is None:
        return None
    try:
        return time.clock_gettime_ns(clock) / 1000.0
    except OSError:
        return None


def _wait_for(path: str, timeout: float) -> dict:
    """The harness's word that the build is done (and where the extension is)."""
    import json

    deadline = time.monotonic() + timeout
    delay = 0.001
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                return json.load(f)
        except (OSError, ValueError):
            time.sleep(delay)
            delay = min(delay * 2, 0.02)
    return {"compiled": False}


def _finish(cand: _Peer, bandwidth: bool = False) -> wire.Claims:
    try:
        return cand.ask({"op": "finish", "bandwidth": bandwidth}).get("claims") or {}
    except channel.ChannelClosed:
        return {}


def _times(values: Any) -> list[float] | None:
    """A reply's call times (µs), or None unless it is a list of finite numbers, none below 0."""
    if values is None:
        return []
    if not isinstance(values, list):
        return None
    out = []
    for x in values:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0.0:
            return None
        out.append(float(x))
    return out


def checks_needed(n: int, one_in: int, detect: float) -> tuple[int, float]:
    """(m, p): the fewest of `n` timed calls to check, drawn without replacement after the calls,
    so that a kernel wrong on one call in `one_in` (ceil(n / one_in) of them) is caught with
    probability at least `detect`, and the probability p that it is missed:
    C(n - bad, m) / C(n, m), the hypergeometric chance that no wrong call is drawn."""
    if n <= 0:
        return 0, 1.0
    bad = max(1, math.ceil(n / max(1, one_in)))
    for m in range(1, n + 1):
        miss = math.comb(n - bad, m) / math.comb(n, m)
        if miss <= 1.0 - detect:
            return m, miss
    return n, 0.0


def burst_size(claim_us: float, call_bytes: int, budget: int = BURST_BYTES) -> int:
    """Calls in a burst for a kernel that claims `claim_us` a call and whose inputs and outputs
    take `call_bytes`: 0 where none is needed (a claim long enough for the window's calls) or
    fewer than BURST_LEAST fit the budget."""
    if not math.isfinite(claim_us) or claim_us >= BURST_CLAIM_MOST_US:
        return 0
    wanted = math.ceil(BURST_TARGET_US / (max(claim_us, 0.0) + BURST_HOST_US))
    fits = budget // max(1, call_bytes)
    k = min(max(wanted, BURST_LEAST), BURST_MOST, fits)
    return k if k >= BURST_LEAST else 0


def burst_checks(k: int, rounds: int, one_in: int, detect: float, most: int | None = None) -> tuple[list[int], float]:
    """(ms, p): how many of each burst's `k` calls to check (one count a burst), drawn after the
    burst, so that a kernel wrong on one call in `one_in` of every burst is caught with
    probability at least `detect` over `rounds` bursts, yet no more than `most` a burst (at least
    one), and the probability p that such a kernel is missed by those checks. The counts differ by
    at most one: the fewest checks in all that reach `detect` (each checked output is a full copy
    handed over, which is what a profile of a large output spends its checking on)."""
    if k <= 0 or rounds <= 0:
        return [], 1.0
    bad = max(1, math.ceil(k / max(1, one_in)))
    cap = k if most is None else max(1, min(k, most))
    target = 1.0 - detect

    def missed(m: int) -> float:
        return math.comb(k - bad, m) / math.comb(k, m)

    def split(m: int, fewer: int) -> float:  # `fewer` bursts check m - 1 calls, the rest m
        return missed(m - 1) ** fewer * missed(m) ** (rounds - fewer)

    for m in range(1, cap + 1):
        if missed(m) ** rounds <= target:
            # m in every burst suffices; as many bursts as can stay at m - 1 (never none) do.
            fewer = max((f for f in range(rounds) if m > 1 and split(m, f) <= target), default=0)
            return [m - 1] * fewer + [m] * (rounds - fewer), split(m, fewer)
    return [cap] * rounds, missed(cap) ** rounds


def _bursts(
    spec: dict,
    cand: _Peer,
    base: _Peer,
    claim_us: float,
    commits: Commits,
    rng: Any,
    clocks: tuple[int | None, int | None] = (None, None),
) -> dict[str, Any]:
    """The window's bursts, as the window's `bursts`, `burst_calls` and `burst_detection` (none
    where the kernel needs none), or a WindowError: each round's candidate burst, its process's null burst and the
    baselines' null burst, each timed here from request to reply (and, where `clocks` holds the
    two processes' CPU-time clocks, on the burst's process's own clock too); the candidate's outputs
    committed to, a few of each burst kept to be checked (chosen after the commit) and the rest
    dropped."""
    import executor

    t = spec["timing"]
    rounds = int(t.get("bursts") or 0)
    timed_sets = [int(k) for k in spec["timed_sets"]]
    if rounds <= 0 or not timed_sets:
        return {}
    sizes = base.ask({"op": "burst_sizes", "sets": timed_sets})
    if not sizes.get("ok"):
        return {}
    out_bytes = max(1, int(sizes.get("output_bytes") or 0))
    k = burst_size(claim_us, int(sizes.get("input_bytes") or 0) + out_bytes, int(t.get("burst_bytes") or BURST_BYTES))
    if not k:
        return {}
    most = int(t.get("burst_check_bytes") or BURST_BYTES) // (out_bytes * rounds)
    per_burst, miss = burst_checks(k, rounds, int(spec.get("one_in", 5)), float(spec.get("detect", 0.99)), most)
    rng.shuffle(per_burst)  # which bursts are checked more is not known in advance either
    found: list[wire.Burst] = []
    checked: list[wire.Call] = []
    ops = 0  # the ops the candidate's stand-in dispatches, which the baselines' stand-in matches
    sides = ["candidate", "null", "base_null"]
    for r in range(rounds):
        row: wire.Burst = {"round": r, "n": k, "candidate_us": 0.0, "null_us": 0.0, "base_null_us": 0.0}
        for side in sides[r % 3 :] + sides[: r % 3]:
            first = BURST_BASE + (r * len(sides) + sides.index(side)) * k
            calls: list[wire.Call] = [
                {"id": first + j, "model": 0, "set": rng.choice(timed_sets), "seed": secrets.randbits(62)}
                for j in range(k)
            ]
            peer = base if side == "base_null" else cand
            stopped = cand.stop(spare=(base.pid,)) if side == "base_null" else []
            try:
                made = peer.ask({"op": "burst_prepare", "calls": calls, "null": side != "candidate", "ops": ops})
                if side == "candidate" and isinstance(made.get("ops"), int):
                    ops = max(0, min(int(made["ops"]), executor.STAND_IN_OPS_MOST))
                if not made.get("ok"):
                    return {
                        "error": f"{side} burst could not be prepared: {made.get('error', '')}"[:600],
                        "baselines_failed": side == "base_null",
                    }
                clock = clocks[1] if side == "base_null" else clocks[0]
                before = _cpu_us(clock)
                reply, burst_us = _make_calls(peer, {"op": "burst_run"})
                after = _cpu_us(clock)
            finally:
                cand.cont(stopped)
            if not reply.get("ok"):
                return {
                    "error": f"{side} failed in a burst: {reply.get('error', '')}"[:600],
                    "baselines_failed": side == "base_null",
                }
            row[f"{side}_us"] = round(burst_us, 2)  # type: ignore[literal-required]
            if before is not None and after is not None:
                row[f"{side}_cpu_us"] = round(after - before, 2)  # type: ignore[literal-required]
            if side != "candidate":
                continue
            committed = cand.ask({"op": "burst_commit"})
            if not committed.get("ok"):
                return {"error": "the candidate's burst outputs could not be committed"}
            fps, proofs = committed.get("fingerprints") or [], committed.get("evidence") or []
            if len(fps) != k or len(proofs) != k:
                return {"error": f"the candidate committed to {len(fps)} of a burst's {k} outputs"}
            for c, fp, ev in zip(calls, fps, proofs):
                commits[c["id"]] = (fp, ev)
            chosen = rng.sample(calls, per_burst[r])
            checked.extend(chosen)
            keep = {c["id"] for c in chosen}
            cand.ask({"op": "drop", "ids": [c["id"] for c in calls if c["id"] not in keep]})
        found.append(row)
    detection: wire.Detection = {
        "checked": len(checked),
        "timed": k * rounds,
        "one_in": int(spec.get("one_in", 5)),
        "probability": round(1.0 - miss, 4),
    }
    return {"bursts": found, "burst_calls": sorted(checked, key=lambda c: c["id"]), "burst_detection": detection}


def _time_side_by_side(spec: dict, cand: _Peer, base: _Peer, commits: Commits) -> wire.TimingWindow | wire.WindowError:
    pinning = Pinning()
    try:
        return _timed_window(spec, cand, base, commits, pinning)
    finally:
        pinning.restore()


def _timed_window(
    spec: dict, cand: _Peer, base: _Peer, commits: Commits, pinning: Pinning
) -> wire.TimingWindow | wire.WindowError:
    t = spec["timing"]
    trials, warmup, block = int(t["trials"]), int(t["warmup"]), max(1, int(t["block"]))
    timed_sets = [int(k) for k in spec["timed_sets"]]
    waited = time.perf_counter()
    try:
        ready = base.ready() if isinstance(base, _Service) else base.chan.recv(cand.timeout)
    except channel.ChannelClosed as exc:
        return {"error": f"the baselines could not be prepared: {exc}", "baselines_failed": True}
    if not ready.get("ok"):
        return {"error": "the baselines could not be prepared", "baselines_failed": True}
    # On the CPU with one thread a side, both sides' processes run on one and the same core for
    # the window (once the baselines are ready, so nothing they start to prepare stays pinned):
    # every side's calls then meet the same core and caches, whichever core the scheduler would
    # have handed each process.
    # On the CPU with one thread the candidate's process is also timed by its CPU-time clock: a
    # block's work there is not inflated by other programs taking its core (harness/scoring.py).
    one_thread = spec["device"] == "cpu" and int(spec.get("threads") or 0) == 1
    pinned_cpu = None
    if one_thread:
        allowed = os.sched_getaffinity(0)
        core = max(allowed)
        pinned_cpu = core if pinning.pin([cand.pid, base.pid], {core}) else None
        # The harness's own processes (this controller, the zygote, and the program that asked
        # for the profile: a terminal app redrawing as it waits) keep to the other cores while
        # the window is timed, so their work never lands between one side's blocks and not the
        # other's. Put back after the window, and by the harness itself after every job.
        if pinned_cpu is not None and len(allowed) > 1:
            pinning.pin(_callers(), allowed - {core})
    # Eager, every compiled baseline the baselines' process could make, then the candidate.
    sides = ["eager", *[s for s in BASELINE_SIDES if s in ready.get("sides", [])], "candidate"]
    # The baselines' process makes null blocks too: the same harness work around a stand-in,
    # where no candidate code ever ran (harness/scoring.py believes the candidate's up to theirs).
    if "null" in ready.get("sides", []):
        sides.append("base_null")
    waited = time.perf_counter() - waited
    rng = secrets.SystemRandom()

    def new_calls(first_id: int, n: int) -> list[wire.Call]:
        return [
            {"id": first_id + j, "model": 0, "set": rng.choice(timed_sets), "seed": secrets.randbits(62)}
            for j in range(n)
        ]

    cpu_clock = process_cpu_clock(cand.pid) if one_thread else None
    # The baselines' process's own clock, for its null blocks: the trusted measure of the same
    # work on the same clock as the candidate's null blocks.
    base_clock = process_cpu_clock(base.pid) if one_thread else None
    cpu_spent: dict[str, float] = {}

    def timed(clock: int | None, peer: _Peer, request: dict) -> tuple[dict, float]:
        before = _cpu_us(clock)
        reply, block_us = _make_calls(peer, request)
        after = _cpu_us(clock)
        if before is not None and after is not None:
            cpu_spent["last"] = after - before
        else:
            cpu_spent.pop("last", None)
        return reply, block_us

    disturbed: list[float] = []  # lead-in ratios of the trusted blocks made again

    def run(side: str, calls: list[wire.Call]) -> tuple[dict, float]:
        if side in ("candidate", "null"):
            return timed(cpu_clock, cand, {"op": "calls", "calls": calls, "null": side == "null"})
        stopped = cand.stop(spare=(base.pid,))
        try:
            request = {"op": "calls", "side": "null" if side == "base_null" else side, "calls": calls}
            # A trusted block whose lead-ins or flushes took longer than calibrated shared the
            # device with something (work the candidate's process left queued, a kernel of its
            # still running while it is stopped) or ran at a lowered clock: made again, the
            # candidate still stopped, once what was left has had time to drain.
            for attempt in range(TRUSTED_RETRIES + 1):
                reply, block_us = (
                    timed(base_clock, base, request) if side == "base_null" else _make_calls(base, request)
                )
                ratio = reply.get("device_ratio") if reply.get("ok") else None
                if not isinstance(ratio, (int, float)) or ratio <= DEVICE_SLOW:
                    return reply, block_us
                disturbed.append(round(float(ratio), 3))
                if attempt < TRUSTED_RETRIES:
                    time.sleep(RETRY_PAUSE_S * (attempt + 1))
            return {
                "ok": False,
                "device_contention": True,
                "error": f"the device ran {ratio:.2f} times slower than calibrated before each {side} call "
                f"(the lead-in and the flush), in {TRUSTED_RETRIES + 1} tries while the candidate's "
                "process was stopped: work of its process still running on the device, or another "
                "program using this GPU (or its clocks lowered)",
            }, block_us
        finally:
            cand.cont(stopped)

    # Memory for every output the window keeps, held by each side's allocator beforehand.
    size = int(cand.ask({"op": "reserve", "bytes": 0}).get("output_bytes") or 0)
    need = size * (trials + 1) + (64 << 20)
    cand.ask({"op": "reserve", "bytes": need})
    # The candidate's process also makes null blocks (the same calls around a stand-in): its own
    # overhead per call, timed here, against which its claims are bounded.
    sides.append("null")
    # Warm-up, every side on the same calls; the candidate's outputs are dropped at once.
    warm = new_calls(WARM_BASE, warmup)
    for side in sides:
        if warmup:
            reply, _ = run(side, warm)
            if reply.get("device_contention"):
                return {"error": reply["error"], "device_contention": True, "trusted_retries": disturbed}
            if not reply.get("ok"):
                return {
                    "error": f"{side} failed during warm-up: {reply.get('error', '')}"[:600],
                    "baselines_failed": side not in ("candidate", "null"),
                }
    if warmup:
        cand.ask({"op": "drop", "ids": [c["id"] for c in warm]})

    strays = _strays(cand, base)
    if strays:
        return _strays_error(strays, "when timing began")
    load_before = _idle_load([cand.pid, base.pid])
    meter = LoadMeter([cand.pid, base.pid])
    meter.start()
    blocks: wire.SideBlocks = {s: [] for s in sides}
    all_calls: list[wire.Call] = []
    rounds = (trials + block - 1) // block
    for r in range(rounds):
        calls = new_calls(TIMED_BASE + r * block, min(block, trials - r * block))
        all_calls.extend(calls)
        order = sides[r % len(sides) :] + sides[: r % len(sides)]
        for side in order:
            reply, block_us = run(side, calls)
            if reply.get("device_contention"):
                return {"error": reply["error"], "device_contention": True, "trusted_retries": disturbed}
            if not reply.get("ok"):
                return {
                    "error": f"{side} failed while timed: {reply.get('error', '')}"[:600],
                    "baselines_failed": side not in ("candidate", "null"),
                }
            # A time is a finite number of microseconds, not below zero: NaN compares false with
            # every bound and a claim of 0 or less makes any ratio infinite.
            events, walls = _times(reply.get("events_us")), _times(reply.get("walls_us"))
            if events is None or walls is None:
                return {
                    "error": f"{side} reported call times that are not finite, non-negative numbers",
                    "forged_times": side in ("candidate", "null"),
                }
            events, walls = events[: len(calls)], walls[: len(calls)]
            if len(events) != len(calls):
                return {"error": f"{side} answered for {len(events)} of {len(calls)} calls"}
            blocks[side].append(
                {"round": r, "events_us": events, "walls_us": walls, "block_us": block_us, "n": len(calls)}
            )
            if side not in ("candidate", "null") and isinstance(reply.get("device_ratio"), (int, float)):
                blocks[side][-1]["device_ratio"] = round(float(reply["device_ratio"]), 4)
            if side in ("candidate", "null", "base_null") and "last" in cpu_spent:
                blocks[side][-1]["cpu_us"] = cpu_spent.pop("last")
            if side == "candidate":
                for c, fp, ev in zip(calls, reply.get("fingerprints", []), reply.get("evidence", [])):
                    commits[c["id"]] = (fp, ev)
    claims = [e for b in blocks["candidate"] for e in b["events_us"]]
    bursts = _bursts(
        spec, cand, base, statistics.median(claims) if claims else math.inf, commits, rng, (cpu_clock, base_clock)
    )
    if "error" in bursts:
        return bursts  # type: ignore[return-value]
    strays = _strays(cand, base)
    if strays:
        return _strays_error(strays, "while it was timed")
    found: wire.TimingWindow = {
        "blocks": blocks,
        "calls": all_calls,
        "load_before": round(load_before, 3),
        "load_during": round(meter.foreign_cores(), 3),
        "trials": len(all_calls),
        "warmup": warmup,
        "block": block,
        "baselines_wait_s": round(waited, 4),
        "pinned_cpu": pinned_cpu,
        "trusted_retries": disturbed,
        "baselines_ready": {
            "prepare_s": ready.get("prepare_s"),
            "rounds": ready.get("rounds"),
            "reused": ready.get("reused"),
        },
    }
    found.update(bursts)  # type: ignore[typeddict-item]
    return found

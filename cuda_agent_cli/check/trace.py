"""`cuda-agent trace -- CMD`: what the integrated kernels did in the user's own program.

The command runs with CUDA_AGENT_TRACE set: every integrated class's loader counts its calls,
those that took the kernel and those that fell back by reason (shape, dtype, device, layout,
autograd, constructor arguments, stale source, not built, ...), and appends one record per
class and process when the process exits; once more so with CUDA_AGENT_DISABLE_KERNELS=1, for
the time spent in the classes without kernels. These two runs are not timed (counting costs a
little on every call, and the first also pays what a fresh machine pays once, a kernel's build).
Then the command runs as it is, alternately with kernels and with CUDA_AGENT_DISABLE_KERNELS=1,
a few times each: the end-to-end figure is the median of the paired ratios (a run without over
the run with kernels next to it) with a bootstrap interval over the pairs.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from cuda_agent_cli.errors import BadInput, JobFailed


@dataclass
class KernelTrace:
    """One integrated class over every process of a run."""

    target: str
    calls: int = 0
    taken: int = 0
    declined: dict[str, int] = field(default_factory=dict)
    seconds_in_class: float = 0.0  # host time inside forward, with kernels
    seconds_without: float | None = None  # the same with kernels off (the timed runs)
    state: str = "on"  # on | disabled | stale source
    shapes: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "calls": self.calls,
            "taken": self.taken,
            "declined": dict(sorted(self.declined.items(), key=lambda kv: -kv[1])),
            "seconds_in_class": round(self.seconds_in_class, 6),
            "seconds_in_class_without_kernels": None
            if self.seconds_without is None
            else round(self.seconds_without, 6),
            "state": self.state,
            "shapes": [{"shape": k, "calls": v} for k, v in sorted(self.shapes.items(), key=lambda kv: -kv[1])],
        }


@dataclass
class TraceReport:
    command: list[str]
    exit_code: int
    kernels: list[KernelTrace]
    with_kernels_s: list[float] = field(default_factory=list)
    without_kernels_s: list[float] = field(default_factory=list)
    speedup: float | None = None
    interval: tuple[float, float] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "exit_code": self.exit_code,
            "kernels": [k.to_json() for k in self.kernels],
            "wall": {
                "with_kernels_s": [round(x, 4) for x in self.with_kernels_s],
                "without_kernels_s": [round(x, 4) for x in self.without_kernels_s],
                "speedup": None if self.speedup is None else round(self.speedup, 4),
                "interval": None if self.interval is None else [round(x, 4) for x in self.interval],
                "how": "median of paired ratios (without / with kernels, runs interleaved), "
                "95% bootstrap interval over the pairs; the first run with kernels is a warm-up",
            },
        }


def merge(records: list[dict[str, Any]]) -> list[KernelTrace]:
    """One KernelTrace per target from every process's records (pure)."""
    out: dict[str, KernelTrace] = {}
    for r in records:
        k = out.setdefault(str(r.get("target")), KernelTrace(str(r.get("target"))))
        k.calls += int(r.get("calls", 0))
        k.taken += int(r.get("taken", 0))
        k.seconds_in_class += float(r.get("seconds_in_class", 0.0))
        for reason, n in (r.get("declined") or {}).items():
            k.declined[reason] = k.declined.get(reason, 0) + int(n)
        for s in r.get("shapes") or []:
            k.shapes[s["shape"]] = k.shapes.get(s["shape"], 0) + int(s["calls"])
        if r.get("state") and r.get("state") != "on":
            k.state = str(r["state"])
    return sorted(out.values(), key=lambda k: k.target)


def paired_speedup(with_s: list[float], without_s: list[float]) -> tuple[float, tuple[float, float]] | None:
    """Median of without/with over the pairs, and its 95% bootstrap interval (pure)."""
    from cuda_agent_cli.harness.bootstrap import bootstrap_medians, percentile_interval

    pairs = [b / a for a, b in zip(with_s, without_s) if a > 0]
    if not pairs:
        return None
    return statistics.median(pairs), percentile_interval(bootstrap_medians(pairs))


def _run(command: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, float, str]:
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            start_new_session=True,
        )
    except FileNotFoundError:
        raise BadInput(f"trace: `{command[0]}` was not found", "give the command as you would run it") from None
    except subprocess.TimeoutExpired:
        raise JobFailed(f"trace: `{' '.join(command)}` ran for more than {timeout:.0f} s", "pass --timeout") from None
    lines = [ln.strip() for ln in ((proc.stderr or "") + "\n" + (proc.stdout or "")).splitlines() if ln.strip()]
    return proc.returncode, time.perf_counter() - start, lines[-1][:300] if lines else ""


def trace(
    command: list[str],
    cwd: Path,
    *,
    repeat: int = 3,
    timeout: float = 3600.0,
    stage: Callable[[str], None] = lambda _m: None,
) -> TraceReport:
    """Run `command` with kernels traced, then `repeat` timed pairs with and without kernels."""
    if not command:
        raise BadInput("trace needs a command", "cuda-agent trace -- python train.py")
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_AGENT_TRACE", "CUDA_AGENT_DISABLE_KERNELS")}
    with tempfile.TemporaryDirectory(prefix="cuda-agent-trace-") as tmp:
        counted = Path(tmp) / "with.jsonl"
        stage(f"running {' '.join(command)} with the kernels traced")
        code, _, tail = _run(command, cwd, {**env, "CUDA_AGENT_TRACE": str(counted)}, timeout)
        if code != 0:
            raise JobFailed(
                f"trace: `{' '.join(command)}` exited with {code}" + (f": {tail}" if tail else ""),
                "fix the command first; it runs as it would without cuda-agent",
            )
        kernels = merge(_read(counted))
        report = TraceReport(command, code, kernels)
        off = Path(tmp) / "without.jsonl"
        stage(f"running {' '.join(command)} with the kernels off, traced")
        _expect(
            command,
            _run(command, cwd, {**env, "CUDA_AGENT_DISABLE_KERNELS": "1", "CUDA_AGENT_TRACE": str(off)}, timeout),
        )
        by_target = {k.target: k for k in merge(_read(off))}
        for k in kernels:
            if k.target in by_target:
                k.seconds_without = by_target[k.target].seconds_in_class
        for i in range(repeat):
            stage(f"timing run {i + 1} of {repeat}: with kernels, then without")
            report.with_kernels_s.append(_expect(command, _run(command, cwd, env, timeout)))
            report.without_kernels_s.append(
                _expect(command, _run(command, cwd, {**env, "CUDA_AGENT_DISABLE_KERNELS": "1"}, timeout))
            )
        found = paired_speedup(report.with_kernels_s, report.without_kernels_s)
        if found is not None:
            report.speedup, report.interval = found
    return report


def _expect(command: list[str], ran: tuple[int, float, str]) -> float:
    """The run's seconds; a run that failed where the first did not is an error."""
    code, seconds, tail = ran
    if code != 0:
        raise JobFailed(
            f"trace: `{' '.join(command)}` exited with {code} on a later run" + (f": {tail}" if tail else ""),
            "a command that does not run the same way each time cannot be timed",
        )
    return seconds


def _read(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def summary_lines(report: TraceReport) -> list[str]:
    """What a terminal shows: a line or two per kernel, then the end-to-end figure."""
    lines: list[str] = []
    if not report.kernels:
        lines.append("no integrated kernel was loaded by this command (no class it imports has one applied)")
    for k in report.kernels:
        fell = k.calls - k.taken
        why = ", ".join(f"{reason} {n}" for reason, n in sorted(k.declined.items(), key=lambda kv: -kv[1]))
        head = f"{k.target}: {k.calls} calls, {k.taken} took the kernel"
        if fell:
            head += f", {fell} ran the original ({why})"
        if k.state != "on":
            head += f" [kernel {k.state}]"
        lines.append(head)
        spent = f"  time in the class (host, traced runs): {k.seconds_in_class * 1e3:.1f} ms with kernels"
        if k.seconds_without is not None:
            spent += f", {k.seconds_without * 1e3:.1f} ms without"
        lines.append(spent)
    if report.speedup is not None and report.interval is not None:
        with_s = statistics.median(report.with_kernels_s)
        without_s = statistics.median(report.without_kernels_s)
        lo, hi = report.interval
        lines.append(
            f"{' '.join(report.command)}: {without_s * 1e3:.0f} ms -> {with_s * 1e3:.0f} ms, "
            f"{report.speedup:.2f}x [{lo:.2f}, {hi:.2f}] ({len(report.with_kernels_s)} runs each way, interleaved)"
        )
    return lines

"""`--capture "CMD"`: run the user's own command and record the calls it makes to the target class.

The command runs unchanged, with one addition: task/capture_hook.py as `sitecustomize.py` on
PYTHONPATH (with task/describe.py beside it), which counts the class's forward calls by signature
(shapes, dtypes, constant arguments, constructor arguments) in every Python the command starts,
and stops the command once it has seen enough (see the hook).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_agent_cli.errors import InputSpecError
from cuda_agent_cli.task.capture_hook import DESCRIBE_MODULE, signature_key, widest
from cuda_agent_cli.task.inputs import CallSpec, call_from_json

_HOOK_DIR_FILES = {"sitecustomize.py": "capture_hook.py", f"{DESCRIBE_MODULE}.py": "describe.py"}


MOST_SIGNATURES = 8  # the most frequent signatures kept; the rest are reported as left out


@dataclass(frozen=True)
class Captured:
    """What the command did with the class: its call signatures, most frequent first."""

    calls: tuple[tuple[CallSpec, int], ...]
    total: int  # every call seen, the left-out signatures' included
    left_out: int  # signatures beyond MOST_SIGNATURES

    @property
    def first(self) -> CallSpec:
        return self.calls[0][0]


def capture_call(command: str, target_file: Path, class_name: str, cwd: Path, timeout: float = 600.0) -> CallSpec:
    """The most frequent call the command makes (see capture_calls)."""
    return capture_calls(command, target_file, class_name, cwd, timeout).first


def capture_calls(
    command: str,
    target_file: Path,
    class_name: str,
    cwd: Path,
    timeout: float = 600.0,
) -> Captured:
    """Run `command` in `cwd` and return the calls it made to `class_name` of `target_file`."""
    with tempfile.TemporaryDirectory(prefix="cuda-agent-capture-") as tmp:
        hook_dir = Path(tmp) / "hook"
        hook_dir.mkdir()
        here = Path(__file__).parent
        for name, source in _HOOK_DIR_FILES.items():
            (hook_dir / name).write_text((here / source).read_text())
        out = Path(tmp) / "call.json"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(hook_dir), env.get("PYTHONPATH", "")) if p)
        env["CUDA_AGENT_CAPTURE_TARGET"] = str(target_file.resolve())
        env["CUDA_AGENT_CAPTURE_CLASS"] = class_name
        env["CUDA_AGENT_CAPTURE_OUT"] = str(out)
        try:
            proc = subprocess.run(
                command,
                shell=True,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
                start_new_session=True,
            )
        except subprocess.TimeoutExpired:
            raise InputSpecError(
                f"--capture: `{command}` ran for {timeout:.0f} s without calling {class_name}.forward",
                "give a command that reaches the first forward call sooner, or use --inputs",
            ) from None
        records = [json.loads(p.read_text()) for p in sorted(Path(tmp).glob("call.json.[0-9]*")) if p.suffix != ".tmp"]
        if not records and not Path(str(out) + ".loaded").exists() and proc.returncode == 0:
            raise InputSpecError(
                f"--capture: `{command}` ran, but no Python it started loaded the recording hook "
                "(the command sets PYTHONPATH itself, or runs python with -I, -E or -S)",
                "set such paths before cuda-agent instead (PYTHONPATH=src cuda-agent optimize ... "
                '--capture "python train.py"), or use --inputs',
            )
        if not records:
            last = _last_line(proc.stderr) or _last_line(proc.stdout)
            why = f"exited with {proc.returncode}" + (f": {last}" if last else "")
            raise InputSpecError(
                f"--capture: `{command}` {why}, without calling {class_name}.forward from {target_file.name}",
                "check that the command constructs and calls the class, or use --inputs",
            )
    return merge_records(records)


def merge_records(records: list[dict[str, Any]]) -> Captured:
    """The signatures of every process's record, counted together (an integer tensor's value range
    is the union of its calls'), most frequent first."""
    merged: dict[str, dict[str, Any]] = {}
    total = 0
    for record in records:
        total += int(record.get("total", 0))
        for entry in record.get("calls", []):
            key = signature_key(entry["call"])
            if key in merged:
                merged[key]["count"] += entry["count"]
                merged[key]["call"] = widest(merged[key]["call"], entry["call"])
            else:
                merged[key] = {"call": entry["call"], "count": int(entry["count"])}
    if not merged:
        error = next((r["error"] for r in records if r.get("error")), "no call could be described")
        raise InputSpecError(f"--capture: {error}", "add get_inputs()/get_init_inputs() to the module or use --inputs")
    ranked = sorted(merged.values(), key=lambda e: -e["count"])
    kept = tuple((call_from_json(e["call"]), int(e["count"])) for e in ranked[:MOST_SIGNATURES])
    return Captured(kept, total, max(0, len(ranked) - MOST_SIGNATURES))


def _last_line(text: str | None) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""

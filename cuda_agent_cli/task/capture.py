"""`--capture "CMD"`: run the user's own command and record the first call to the target class.

The command runs unchanged, with one addition: task/capture_hook.py as `sitecustomize.py` on
PYTHONPATH (with task/describe.py beside it), which records the first forward call of the class
and stops the command.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

from cuda_agent_cli.errors import InputSpecError
from cuda_agent_cli.task.capture_hook import DESCRIBE_MODULE
from cuda_agent_cli.task.inputs import CallSpec, call_from_json

_HOOK_DIR_FILES = {"sitecustomize.py": "capture_hook.py", f"{DESCRIBE_MODULE}.py": "describe.py"}


def capture_call(
    command: str,
    target_file: Path,
    class_name: str,
    cwd: Path,
    timeout: float = 600.0,
) -> CallSpec:
    """Run `command` in `cwd` and return the first recorded call to `class_name` of `target_file`."""
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
        if not out.is_file() and not Path(str(out) + ".loaded").exists() and proc.returncode == 0:
            raise InputSpecError(
                f"--capture: `{command}` ran, but no Python it started loaded the recording hook "
                "(the command sets PYTHONPATH itself, or runs python with -I, -E or -S)",
                "set such paths before cuda-agent instead (PYTHONPATH=src cuda-agent optimize ... "
                '--capture "python train.py"), or use --inputs',
            )
        if not out.is_file():
            last = _last_line(proc.stderr) or _last_line(proc.stdout)
            why = f"exited with {proc.returncode}" + (f": {last}" if last else "")
            raise InputSpecError(
                f"--capture: `{command}` {why}, without calling {class_name}.forward from {target_file.name}",
                "check that the command constructs and calls the class, or use --inputs",
            )
        record = json.loads(out.read_text())
    if "error" in record:
        raise InputSpecError(
            f"--capture: {record['error']}", "add get_inputs()/get_init_inputs() to the module or use --inputs"
        )
    return call_from_json(record["call"])


def _last_line(text: str | None) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""

"""`--capture "CMD"`: run the user's own command and record the first call to the target class.

The command runs unchanged, with one addition: a `sitecustomize.py` on PYTHONPATH that wraps
`builtins.__build_class__`. When the target class is created (matched by its name and the file
that defines it, so any import path works), its `__init__` and `forward` are wrapped; the first
forward call of an instance of exactly that class writes a JSON description (dtypes, shapes,
devices, integer ranges; never the data) of the constructor and forward arguments, and the
command is then stopped so a long training script does not run to the end.

The hook runs inside whatever Python the command starts, so it is self-contained: standard
library only, plus torch, which the user's code has already imported by then.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

from cuda_agent_cli.errors import InputSpecError
from cuda_agent_cli.inputs_spec import CallSpec, call_from_json

# Turns live Python values into the JSON form of inputs_spec.value_to_json. Shared with the
# probe of task.py, which runs it on get_inputs() results.
DESCRIBE_SOURCE = r'''
def _ca_describe(value, where):
    import torch
    if isinstance(value, torch.Tensor):
        t = {"dtype": str(value.dtype).replace("torch.", ""), "shape": list(value.shape)}
        if value.device.type != "cpu":
            t["device"] = value.device.type
        if not value.is_floating_point() and value.dtype != torch.bool and value.numel():
            t["range"] = [int(value.min().item()), int(value.max().item()) + 1]
        return {"tensor": t}
    if isinstance(value, bool) or value is None or isinstance(value, (int, float, str)):
        return {"value": value}
    if isinstance(value, (list, tuple)):
        kind = "list" if isinstance(value, list) else "tuple"
        return {kind: [_ca_describe(v, f"{where}[{i}]") for i, v in enumerate(value)]}
    if isinstance(value, torch.dtype):
        raise TypeError(f"{where} is a torch.dtype ({value}); pass dtypes through get_init_inputs()")
    raise TypeError(f"{where} is a {type(value).__module__}.{type(value).__qualname__}, "
                    "which cannot be described as a shape and dtype")


def _ca_describe_call(args, kwargs, what):
    out = [dict(name=None, **_ca_describe(a, f"{what} argument {i}")) for i, a in enumerate(args)]
    out += [dict(name=k, **_ca_describe(v, f"{what} argument {k!r}")) for k, v in kwargs.items()]
    return out
'''

HOOK_SOURCE = DESCRIBE_SOURCE + r'''
import builtins as _ca_builtins
import functools as _ca_functools
import json as _ca_json
import os as _ca_os

_CA_FILE = _ca_os.path.realpath(_ca_os.environ["CUDA_AGENT_CAPTURE_TARGET"])
_CA_CLASS = _ca_os.environ["CUDA_AGENT_CAPTURE_CLASS"]
_CA_OUT = _ca_os.environ["CUDA_AGENT_CAPTURE_OUT"]
_ca_original_build_class = _ca_builtins.__build_class__


def _ca_write(record):
    tmp = _CA_OUT + ".tmp"
    with open(tmp, "w") as f:
        _ca_json.dump(record, f)
    _ca_os.replace(tmp, _CA_OUT)


def _ca_wrap(cls):
    init, forward = cls.__init__, cls.forward

    @_ca_functools.wraps(init)
    def __init__(self, *args, **kwargs):
        if type(self) is cls and not hasattr(self, "_cuda_agent_init"):
            try:
                described = _ca_describe_call(args, kwargs, "constructor")
            except TypeError as exc:
                described = {"error": str(exc)}
            object.__setattr__(self, "_cuda_agent_init", described)
        init(self, *args, **kwargs)

    @_ca_functools.wraps(forward)
    def forward_(self, *args, **kwargs):
        if type(self) is cls and not _ca_os.path.exists(_CA_OUT):
            record = {"class": cls.__qualname__}
            init_desc = self.__dict__.get("_cuda_agent_init", [])
            try:
                if isinstance(init_desc, dict):
                    raise TypeError(init_desc["error"])
                record["call"] = {"source": "capture", "init": init_desc,
                                  "args": _ca_describe_call(args, kwargs, "forward")}
            except TypeError as exc:
                record = {"error": str(exc)}
            _ca_write(record)
            if _ca_os.environ.get("CUDA_AGENT_CAPTURE_CONTINUE") != "1":
                _ca_os._exit(0)
        return forward(self, *args, **kwargs)

    cls.__init__ = __init__
    cls.forward = forward_


def _ca_build_class(func, name, *bases, **kwargs):
    cls = _ca_original_build_class(func, name, *bases, **kwargs)
    try:
        if name == _CA_CLASS and isinstance(cls, type):
            defined_in = getattr(func, "__globals__", {}).get("__file__")
            if defined_in and _ca_os.path.realpath(defined_in) == _CA_FILE and hasattr(cls, "forward"):
                _ca_wrap(cls)
    except Exception:
        pass  # never break the user's program over a recording
    return cls


_ca_builtins.__build_class__ = _ca_build_class
'''


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
        (hook_dir / "sitecustomize.py").write_text(HOOK_SOURCE)
        out = Path(tmp) / "call.json"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(hook_dir), env.get("PYTHONPATH", "")) if p)
        env["CUDA_AGENT_CAPTURE_TARGET"] = str(target_file.resolve())
        env["CUDA_AGENT_CAPTURE_CLASS"] = class_name
        env["CUDA_AGENT_CAPTURE_OUT"] = str(out)
        try:
            proc = subprocess.run(
                command, shell=True, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                capture_output=True, text=True, timeout=timeout, start_new_session=True,
            )
        except subprocess.TimeoutExpired:
            raise InputSpecError(
                f"--capture: `{command}` ran for {timeout:.0f} s without calling {class_name}.forward",
                "give a command that reaches the first forward call sooner, or use --inputs",
            ) from None
        if not out.is_file():
            last = _last_line(proc.stderr) or _last_line(proc.stdout)
            why = f"exited with {proc.returncode}" + (f": {last}" if last else "")
            raise InputSpecError(
                f"--capture: `{command}` {why}, without calling {class_name}.forward from {target_file.name}",
                "check that the command constructs and calls the class, or use --inputs",
            )
        record = json.loads(out.read_text())
    if "error" in record:
        raise InputSpecError(f"--capture: {record['error']}",
                             "add get_inputs()/get_init_inputs() to the module or use --inputs")
    return call_from_json(record["call"])


def _last_line(text: str | None) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""

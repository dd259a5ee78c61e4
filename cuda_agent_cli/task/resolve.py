"""Target -> Task: import the class in a subprocess (task/probe.py), then build the reference.

The class is imported in a subprocess started in the user's repository (their module may do
anything at import time; cuda-agent's own process must not be affected), with the same sys.path
a user of the package would have, so classes that import the rest of their package work.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from cuda_agent_cli.errors import InputSpecError, TargetError
from cuda_agent_cli.task.inputs import Arg, CallSpec, call_from_json, call_to_json, with_module
from cuda_agent_cli.task.reference import defines_conflicting_names, reference_source
from cuda_agent_cli.task.target import TARGET_HINT, Case, Target, Task, parse_target

INPUTS_HINT = (
    "add get_inputs() (and get_init_inputs()) to the module, pass --inputs "
    '"x=float32[8,1024]", or --capture "python your_script.py"'
)


def _run_probe(
    target: Target, call: CallSpec | None, timeout: float, device: str | None = None, more: list[CallSpec] | None = None
) -> dict[str, Any]:
    request = {
        "device": device,
        "more": [call_to_json(c) for c in more or []],
        "paths": [str(p) for p in target.import_paths],
        "module": target.module_name,
        "class": target.class_name,
        "repo": str(target.repo_root),
        "call": call_to_json(call) if call is not None else None,
    }
    with tempfile.TemporaryDirectory(prefix="cuda-agent-probe-") as tmp:
        req_path, out_path = Path(tmp) / "req.json", Path(tmp) / "out.json"
        req_path.write_text(json.dumps(request))
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        # A module integrated before must be seen as the user wrote it, not through its kernel.
        env["CUDA_AGENT_DISABLE_KERNELS"] = "1"
        try:
            proc = subprocess.run(
                [sys.executable, "-B", "-m", "cuda_agent_cli.task.probe", str(req_path), str(out_path)],
                cwd=target.repo_root,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
                start_new_session=True,
            )
        except subprocess.TimeoutExpired:
            raise TargetError(
                f"importing {target.display} took more than {timeout:.0f} s",
                'make module import cheap, or move slow work under `if __name__ == "__main__":`',
            ) from None
        if not out_path.is_file():
            tail = [ln for ln in (proc.stderr or "").splitlines() if ln.strip()]
            raise TargetError(
                f"importing {target.display} crashed the interpreter (exit {proc.returncode})"
                + (f": {tail[-1][:300]}" if tail else ""),
                f'run `python -c "import {target.module_name}"` in the repository to see why',
            )
        answer: dict[str, Any] = json.loads(out_path.read_text())
        return answer


def _probe_error(target: Target, r: dict[str, Any]) -> Exception:
    kind, detail = r["error"], r.get("detail", "")
    name = target.class_name
    if kind == "torch":
        from cuda_agent_cli.errors import EnvironmentMissing

        return EnvironmentMissing(f"cannot import torch: {detail}", "pip install torch")
    if kind == "import":
        return TargetError(
            f"cannot import {target.module_name} from {target.repo_root}: {detail}",
            "make the module importable from the repository root (missing dependency or path?)",
        )
    if kind == "class":
        cands = r.get("candidates") or []
        hint = f"classes there: {', '.join(cands)}" if cands else "check the class name (it is case-sensitive)"
        return TargetError(f"{target.module_name} has no class `{name}`", hint)
    if kind == "not_module":
        return TargetError(
            f"`{name}` in {target.module_name} is a {detail}, not a torch.nn.Module subclass",
            "point at the nn.Module class to optimize",
        )
    if kind == "source":
        return TargetError(f"cannot read the source of {name}: {detail}", "the class must be defined in a .py file")
    if kind == "no_inputs":
        return InputSpecError(f"no way to make inputs for {name}", INPUTS_HINT)
    if kind == "inputs":
        return InputSpecError(f"inputs of {name} cannot be described: {detail}", INPUTS_HINT)
    if kind == "get_inputs":
        return InputSpecError(
            f"get_inputs()/get_init_inputs() of {target.module_name} failed: {detail}", "fix them, or pass --inputs"
        )
    if kind == "forward":
        where = r.get("device") or "the CPU"
        return InputSpecError(
            f"{name}.forward fails on these inputs ({where}): {detail}",
            "fix the forward, or give inputs it takes (get_inputs(), --inputs or --capture)",
        )
    if kind == "output":
        return InputSpecError(
            f"{name}.forward cannot get a kernel: {detail}",
            "a kernel replaces a forward that returns a tensor, or a tuple or list of tensors",
        )
    if kind == "construct":
        return TargetError(
            f"{name} fails to construct: {detail}",
            'give constructor arguments with get_init_inputs() or --inputs "...; init: ARGS"',
        )
    return TargetError(f"cannot load {target.display}: {kind} {detail}", TARGET_HINT)


def resolve_task(
    target_text: str,
    cwd: Path,
    inputs: CallSpec | Sequence[CallSpec] | None = None,
    capture_command: str | None = None,
    timeout: float = 180.0,
    device: str | None = None,
) -> Task:
    """Parse, import and check the target; explicit inputs (--capture, --inputs) win over get_inputs().

    `inputs` may be several calls (several shapes): the first is the one the session optimizes
    for, the others are verified and timed too. `--capture` gives the command's call signatures,
    most frequent first, with their counts."""
    target = parse_target(target_text, cwd)
    calls: list[tuple[CallSpec, int | None]] = []
    if isinstance(inputs, CallSpec):
        calls = [(inputs, None)]
    elif inputs is not None:
        calls = [(c, None) for c in inputs]
    if capture_command:
        if target.file is None:
            first = _run_probe(target, None, timeout)
            if "file" not in first:
                raise _probe_error(target, first)
            target = _with_file(target, Path(first["file"]))
        from cuda_agent_cli.task.capture import capture_calls

        assert target.file is not None  # a file target, or the probe's answer above
        captured = capture_calls(capture_command, target.file, target.class_name, cwd)
        calls = [(c, n) for c, n in captured.calls]
    # names written in --inputs are the target module's
    calls = [
        (replace(c, args=_bound(c.args, target.module_name), init=_bound(c.init, target.module_name)), n)
        for c, n in calls
    ]
    call = calls[0][0] if calls else None
    r = _run_probe(target, call, timeout, device, [c for c, _ in calls[1:]])
    if "file" in r and target.file is None:
        target = _with_file(target, Path(r["file"]))
    if r.get("error"):
        raise _probe_error(target, r)
    file = Path(r["file"])
    source = file.read_text()
    forward_params = tuple(r.get("forward_params") or ())
    final_call = positional_where_possible(call_from_json(r["call"]) if call is None else call, forward_params)
    more = tuple(
        Case(
            positional_where_possible(c, forward_params),
            n,
            found.get("output") or {"kind": "tensor"},
            _parameters(found),
        )
        for (c, n), found in zip(calls[1:], r.get("more") or [])
    )
    task = Task(
        target=target,
        file=file,
        call=final_call,
        forward_params=forward_params,
        class_source=r["class_source"],
        class_start=int(r["class_start"]),
        class_end=int(r["class_end"]),
        module_source=source,
        module_sha256=hashlib.sha256(source.encode()).hexdigest(),
        standalone=bool(r["standalone"]) and not defines_conflicting_names(source, target.class_name),
        uses_module_inputs=bool(r.get("module_inputs")),
        parameters=_parameters(r),
        training_sensitive=bool(r.get("training_sensitive")),
        output=r.get("output") or {"kind": "tensor"},
        count=calls[0][1] if calls else None,
        more=more,
    )
    return _with_reference(task)


def _parameters(found: dict[str, Any]) -> tuple[tuple[str, str, tuple[int, ...]], ...]:
    return tuple((n, d, tuple(s)) for n, d, s in found.get("parameters") or ())


def _bound(args: tuple[Arg, ...], module: str) -> tuple[Arg, ...]:
    return tuple(Arg(a.name, with_module(a.value, module)) for a in args)


def positional_where_possible(call: CallSpec, forward_params: tuple[str, ...]) -> CallSpec:
    """Named forward arguments that sit in signature order become positional (simpler reference)."""
    args = list(call.args)
    i = 0
    while i < len(args) and args[i].name is None:
        i += 1
    while i < len(args) and i < len(forward_params) and args[i].name == forward_params[i]:
        args[i] = Arg(None, args[i].value)
        i += 1
    return replace(call, args=tuple(args))


def _with_file(target: Target, file: Path) -> Target:
    return Target(
        target.text, target.class_name, target.module_name, file.resolve(), target.import_paths, target.repo_root
    )


def _with_reference(task: Task) -> Task:
    return replace(task, reference_source=reference_source(task))

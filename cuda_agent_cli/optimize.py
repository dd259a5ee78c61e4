"""`optimize`: task -> workspace -> harness -> toolbox -> model -> loop -> best candidate -> plan.

The orchestration only: every step is owned elsewhere. It never prints; progress goes to the
injected event sink, and the result (with the write-back plan, not yet applied) comes back to
the CLI, which shows the review and applies only with the user's yes.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from cuda_agent_cli.errors import BadInput, EnvironmentMissing, InputSpecError, JobFailed, ModelConfigError

TASK_FILE = "task.json"  # in the session dir: how to rebuild the task on --resume


@dataclass
class OptimizeRequest:
    target: str | None
    cwd: Path
    model: str | None = None
    api_base: str | None = None
    device: str | None = None
    policy: str | None = None
    inputs: str | None = None
    capture: str | None = None
    max_turns: int | None = None
    max_cost: float | None = None
    timeout: float | None = None
    resume: str | None = None
    continue_latest: bool = False
    allow_unsafe: bool = False
    shell: bool = True  # False: no shell tools, so no sandbox is needed (the bundled demo)


@dataclass
class OptimizeOutcome:
    session_id: str
    transcript: Path
    status: str                       # improved | correct | failed
    stop_reason: str
    turns: int
    cost_usd: float
    device: str
    policy: str
    target: str
    best: dict[str, Any] | None       # the best harness result (DESIGN §3 object)
    best_dir: Path | None             # the snapshot of its files in the session store
    best_files: list[str] = field(default_factory=list)
    plan: Any = None                  # writeback.apply.WriteBackPlan when there is a correct kernel
    sandbox_banner: str | None = None
    stop_detail: str = ""             # e.g. "max_turns 3 from pyproject.toml"
    inputs: dict[str, Any] | None = None  # inputs_json of the call the kernel was made for

    @property
    def reward(self) -> int | None:
        return self.best.get("reward") if self.best else None

    @property
    def timings(self) -> dict[str, Any] | None:
        return (self.best or {}).get("timings")


def status_of(best: dict[str, Any] | None) -> str:
    """improved: faster than eager by >5% (reward 2 or 3); correct: verified only; failed: none."""
    if not best or not best.get("correct"):
        return "failed"
    reward = best.get("reward")
    return "improved" if isinstance(reward, (int, float)) and reward >= 2 else "correct"


# ---------------------------------------------------------------- checks that fail fast

def check_model(model: str | None, api_base: str | None = None) -> None:
    """Exit 3 with no model or a missing key, exit 2 for a model string litellm cannot route.

    With `api_base` (a local or self-hosted OpenAI-compatible server) no API key is required."""
    if not model:
        raise EnvironmentMissing(
            "no model configured",
            "pass --model (e.g. anthropic/claude-sonnet-4-5) or set CUDA_AGENT_MODEL; "
            "`cuda-agent demo` runs without one",
        )
    if model.startswith("replay:"):
        path = Path(model.split(":", 1)[1]).expanduser()
        if not path.is_file():
            raise ModelConfigError(f"replay file {path} does not exist", "pass --model replay:PATH/TO/FILE.jsonl")
        return
    check_api_base(api_base)
    import contextlib
    import io

    from cuda_agent_cli.model.provider import describe_model

    # litellm prints a provider list on stdout for unknown models; the user gets our line instead.
    with contextlib.redirect_stdout(io.StringIO()):
        known, missing = describe_model(model, api_base)
    if not known:
        raise ModelConfigError(f"unknown model `{model}`",
                               "use a litellm model string such as anthropic/claude-sonnet-4-5 or openai/gpt-4.1")
    if missing:
        raise EnvironmentMissing(f"{', '.join(missing)} is not set for {model}", f"export {missing[0]}=...")


def check_limits(cfg: Any) -> None:
    """A limit that would stop the session before its first turn is a mistake, not a setting."""
    for name, unit in (("max_turns", ""), ("max_cost", " USD"), ("timeout", " s")):
        value = getattr(cfg, name)
        if value is not None and value <= 0:
            raise BadInput(f"{name} {value:g}{unit} {cfg.origin_phrase(name)} leaves no room for a single turn",
                           f"give a positive {name}" + (" (or leave it out for no limit)" if name != "max_turns" else ""))


def check_api_base(api_base: str | None) -> None:
    """An --api-base without a scheme reaches nothing; say so before the session starts."""
    if not api_base:
        return
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(api_base)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        raise ModelConfigError(f"--api-base {api_base} is not an http:// or https:// URL",
                               "write it like --api-base http://localhost:8000/v1")


def captured_block(task: Any, command: str) -> str:
    """What --capture recorded, shown before the session so a wrong call is caught at once."""
    lines = [f"captured the first call of {task.target.class_name} in `{command}`:"]
    lines += [f"  {line}" for line in task.call.signature_lines(task.forward_params)]
    return "\n".join(lines)


def inputs_json(call: Any) -> dict[str, Any]:
    """The call the session optimizes for, for --json: where it came from, as text and as data."""
    from cuda_agent_cli.inputs_spec import call_to_json

    return {"text": call.describe(), **call_to_json(call)}


def check_input_devices(call: Any, cfg: Any, what: str) -> None:
    """Refuse inputs whose devices disagree with each other or with the configured device: the
    harness moves every input to the session's device, so a difference would be dropped silently."""
    named = {}
    for label, tensor in call.tensors():
        if tensor.device:
            named.setdefault(tensor.device.split(":")[0], label)
    verb = "recorded" if what == "--capture" else "puts"
    if len(named) > 1:
        (d1, l1), (d2, l2) = sorted(named.items())[:2]
        raise InputSpecError(f"{what} {verb} {l1} on {d1} but {l2} on {d2}; a session runs on one device",
                             "name the same device for every tensor (or none, to use --device)")
    if not named or cfg.device is None:
        return
    (device, label), = named.items()
    if device == cfg.device:
        return
    origin = cfg.origin("device")
    where = f"--device {cfg.device}" if origin == "--device" else f"device {cfg.device} from {origin}"
    if what == "--capture":
        hint = f"pass --device {device}, or give {cfg.device} inputs with --inputs"
    else:
        hint = f"drop `{device}` from --inputs (or write `{cfg.device}`), or pass --device {device}"
    raise InputSpecError(f"{what} {verb} {label} on {device}, but {where} runs the session on {cfg.device}", hint)


# ---------------------------------------------------------------- the run

def _save_task(session_dir: Path, req: OptimizeRequest, task: Any, device: str, policy: str,
               model: str, api_base: str | None) -> None:
    from cuda_agent_cli.inputs_spec import call_to_json

    data = {"target": req.target, "cwd": str(req.cwd), "call": call_to_json(task.call),
            "explicit_inputs": not task.uses_module_inputs, "device": device, "policy": policy,
            "model": model, "api_base": api_base}
    (session_dir / TASK_FILE).write_text(json.dumps(data, indent=2))


def _load_task(session_dir: Path) -> dict[str, Any]:
    path = session_dir / TASK_FILE
    if not path.is_file():
        raise BadInput(f"session {session_dir.name} was not started by optimize", "resume it with `cuda-agent chat`")
    return json.loads(path.read_text())


def run_optimize(
    req: OptimizeRequest,
    sink: Callable[[Any], None] | None = None,
    on_stage: Callable[[str], None] | None = None,
    data_dir: Path | None = None,
    precheck: Callable[[Any], None] | None = None,
    cancel: Any = None,
) -> OptimizeOutcome:
    """Run (or resume) one optimize session and return its outcome with the write-back plan.

    `precheck(task)` runs once the target is imported, before any model call: the CLI refuses
    there what it would refuse at apply time, so nobody pays for a session that cannot land.
    `cancel` (a threading.Event) stops the agent from another thread, as Ctrl-C does."""
    from cuda_agent_cli.config import load_config

    from cuda_agent_cli.agent.session import new_session, resume_session
    from cuda_agent_cli.inputs_spec import call_from_json, parse_inputs_spec
    from cuda_agent_cli.task import resolve_task

    stage = on_stage or (lambda _msg: None)
    resuming = bool(req.resume or req.continue_latest)
    saved: dict[str, Any] = {}
    if data_dir is None:
        configured = load_config({}, cwd=req.cwd).data_dir  # where `cuda-agent sessions` looks too
        data_dir = Path(configured).expanduser() if configured else None
    if resuming:
        state = resume_session(req.resume if req.resume else None, data_dir)
        saved = _load_task(state.session_dir)
    # A resumed session keeps its model unless another one is asked for.
    cfg = load_config({"model": req.model or saved.get("model"), "api_base": req.api_base or saved.get("api_base"),
                       "device": req.device, "policy": req.policy, "max_turns": req.max_turns,
                       "max_cost": req.max_cost, "timeout": req.timeout}, cwd=req.cwd)
    check_limits(cfg)
    check_model(cfg.model, cfg.api_base)
    from cuda_agent_cli.sandbox import require_sandbox

    # Without shell tools nothing runs commands, so nothing needs confining.
    require_sandbox(req.allow_unsafe or not req.shell)

    if resuming:
        cwd = Path(saved["cwd"])
        stage(f"resuming session {state.session_id}")
        task = resolve_task(saved["target"], cwd,
                            inputs=call_from_json(saved["call"]) if saved["explicit_inputs"] else None)
        device, policy = saved["device"], saved["policy"]
        target_text = saved["target"]
    else:
        if not req.target:
            raise BadInput("optimize needs a TARGET", "cuda-agent optimize path/to/file.py::ClassName")
        stage(f"importing {req.target}")
        spec = parse_inputs_spec(req.inputs) if req.inputs else None
        if spec is not None:
            check_input_devices(spec, cfg, "--inputs")
        task = resolve_task(req.target, req.cwd, inputs=spec, capture_command=req.capture)
        if req.capture:
            stage(captured_block(task, req.capture))
            check_input_devices(task.call, cfg, "--capture")
        # An explicit --device wins, then the device the inputs name; else the harness picks.
        device = cfg.device or task.call.device()
        policy = cfg.policy
        target_text = req.target
        state = None

    if precheck is not None:
        precheck(task)
    from cuda_agent_cli.harness import Harness
    from cuda_agent_cli.workspace import create_workspace, open_workspace

    stage("starting the harness")
    if state is None:
        state = new_session(data_dir)
        workspace = create_workspace(state.session_dir, task.reference_source)
        harness = Harness(workspace, device=device, policy=policy, atol=cfg.atol, rtol=cfg.rtol)
        device = harness.device
        _save_task(state.session_dir, req, task, device, policy, cfg.model, cfg.api_base)
    else:
        workspace = open_workspace(state.session_dir)
        harness = Harness(workspace, device=device, policy=policy, atol=cfg.atol, rtol=cfg.rtol)

    from cuda_agent_cli.actions import ActionContext, make_toolbox
    from cuda_agent_cli.agent.loop import Limits, run_agent
    from cuda_agent_cli.agent.prompts import build_system_prompt, task_message
    from cuda_agent_cli.model.factory import make_model
    from cuda_agent_cli.sandbox import SandboxPolicy, open_sandbox

    sandbox = open_sandbox(SandboxPolicy.optimize(workspace.root, list(workspace.locked)),
                           req.allow_unsafe or not req.shell)
    toolbox = make_toolbox(ActionContext(sandbox, harness=harness), shell=req.shell)
    model = make_model(cfg.model, cfg.api_base)
    gpu = (harness.environment().get("gpu") if hasattr(harness, "environment") else None)
    limits = Limits(max_turns=cfg.max_turns, max_cost=cfg.max_cost, timeout=cfg.timeout,
                    context_tokens=cfg.context_tokens,
                    origins={name: cfg.origin_phrase(name) for name in ("max_turns", "max_cost", "timeout")})
    settings = {"device": device, "policy": policy, "max_turns": cfg.max_turns, "max_cost": cfg.max_cost,
                "timeout": cfg.timeout, "inputs": task.call.describe(), "command": "optimize"}
    notes = (f"Inputs: {task.call.describe()}. Device: {device}. Policy: {policy}."
             if not task.uses_module_inputs else None)
    stage("running the agent")
    try:
        result = run_agent(
            model, toolbox, state=state,
            prompt=None if resuming else task_message(task.target.display, task.reference_source, notes),
            system_prompt=build_system_prompt(device=device, policy=policy, gpu=gpu),
            target=target_text, settings=settings, workspace_root=workspace.root,
            limits=limits, sink=sink, cancel=cancel,
        )
    finally:
        close = getattr(toolbox, "close", None)
        if close:
            close()

    best = result.best.result if result.best else None
    best_dir = Path(result.best.snapshot) if result.best and result.best.snapshot else None
    outcome = OptimizeOutcome(
        session_id=result.session_id, transcript=result.transcript, status=status_of(best),
        stop_reason=result.stop_reason, turns=result.turns, cost_usd=result.cost_usd, device=device,
        policy=policy, target=task.target.display, best=best, best_dir=best_dir,
        sandbox_banner=sandbox.banner if req.shell else None, stop_detail=result.detail,
        inputs=inputs_json(task.call),
    )
    if best_dir is not None and best and best.get("correct"):
        files = candidate_files(best_dir)
        outcome.best_files = [str(best_dir / rel) for rel in sorted(files)]
        outcome.plan = make_plan(task, files, workspace, device, policy, best, result.session_id, req.cwd)
    return outcome


def candidate_files(best_dir: Path) -> dict[str, str]:
    """model_new.py and kernels/* of a snapshot, as workspace-relative path -> text."""
    out: dict[str, str] = {}
    if (best_dir / "model_new.py").is_file():
        out["model_new.py"] = (best_dir / "model_new.py").read_text()
    kernels = best_dir / "kernels"
    if kernels.is_dir():
        for p in sorted(kernels.rglob("*")):
            # .keep and other dot files only hold the folder in the template.
            if (p.is_file() and not p.is_symlink() and "__pycache__" not in p.parts
                    and not p.name.startswith(".")):
                out[p.relative_to(best_dir).as_posix()] = p.read_text(errors="replace")
    return out


def _binding_files(workspace: Any) -> dict[str, str]:
    from cuda_agent_cli.resources import sandbox_template_dir

    base = Path(workspace.binding_dir) if getattr(workspace, "binding_dir", None) else sandbox_template_dir()
    return {name: (base / name).read_text() for name in ("binding.cpp", "binding_registry.h")}


def manifest_entry(task: Any, device: str, policy: str, best: dict[str, Any], session_id: str) -> dict[str, Any]:
    """What the manifest records about a kernel from its session (write-back adds the fingerprints
    and file hashes): the verified call, where and how it was measured, and the numbers."""
    from cuda_agent_cli.inputs_spec import call_to_json
    from cuda_agent_cli.machine import this_machine

    timings = best.get("timings") or {}
    env = best.get("environment") or {}
    machine = this_machine()
    return {
        "target": task.target.display,
        "class": task.target.class_name,
        "module": task.target.module_name,
        "module_sha256": task.module_sha256,
        "reference_standalone": bool(task.standalone),
        "inputs_source": "get_inputs" if task.uses_module_inputs else "spec",
        "inputs": task.call.describe(),
        "input_spec": json.dumps(call_to_json(task.call), separators=(",", ":")),
        "device": device,
        "arch": machine.arch(device, env.get("gpu")) or "",
        "gpu": env.get("gpu") or "",
        "cpu": machine.cpu_name if device == "cpu" else None,
        "torch": env.get("torch") or machine.torch or "",
        "cuda": env.get("cuda") or None,
        "policy": policy,
        "reward": best.get("reward"),
        "eager_us": timings.get("eager_us"),
        "compile_us": timings.get("compile_us"),
        "kernel_us": timings.get("candidate_us"),
        "speedup_vs_eager": timings.get("speedup_vs_eager"),
        "speedup_vs_eager_interval": timings.get("speedup_vs_eager_interval"),
        "speedup_vs_compile": timings.get("speedup_vs_compile"),
        "speedup_vs_compile_interval": timings.get("speedup_vs_compile_interval"),
        "method": timings.get("method") or "",
        "trials": timings.get("trials"),
        "session": session_id,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def make_plan(task: Any, files: dict[str, str], workspace: Any, device: str, policy: str,
              best: dict[str, Any], session_id: str, cwd: Path) -> Any:
    from cuda_agent_cli.writeback.apply import build_plan
    from cuda_agent_cli.writeback.integrate import Verified

    verified = Verified(device=device, call=task.call, forward_params=task.forward_params,
                        parameters=task.parameters, training_sensitive=task.training_sensitive)
    entry = manifest_entry(task, device, policy, best, session_id)
    return build_plan(
        module_file=task.file, module_source=task.module_source, class_name=task.target.class_name,
        class_snake=task.class_snake, class_end=task.class_end, display=task.target.display,
        session_id=session_id, candidate_files=files, binding_files=_binding_files(workspace),
        verified=verified, manifest_entry=entry, fallback_root=task.target.repo_root,
    )


def exit_code_for(outcome: OptimizeOutcome) -> int:
    """0 when a correct kernel was found, 1 when not (DESIGN §7)."""
    return 0 if outcome.status in ("improved", "correct") else JobFailed.exit_code

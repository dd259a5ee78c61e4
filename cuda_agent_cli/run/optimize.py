"""One optimize session: task -> workspace -> harness -> toolbox -> model -> loop -> best -> plan.

The sequence only: every step is owned elsewhere. It never prints; progress goes to the injected
event sink, and the outcome (with the write-back plan, not yet applied) comes back to the front
door, which shows the review and applies only with the user's yes. The task is a class in the
user's repository (optimize, the chat's /optimize, check --fix), or a reference given as it is
(a bench suite's problem), which has no module to write back into.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from cuda_agent_cli import preflight
from cuda_agent_cli.actions import ActionContext, make_toolbox
from cuda_agent_cli.agent.loop import Limits, run_agent
from cuda_agent_cli.agent.prompts import build_system_prompt, task_message
from cuda_agent_cli.agent.session_store import SessionState, new_session, resume_session
from cuda_agent_cli.config import Config, Policy, load_config, user_data_dir
from cuda_agent_cli.errors import BadInput, JobFailed
from cuda_agent_cli.harness import Harness
from cuda_agent_cli.harness_result import HarnessResult, Timings
from cuda_agent_cli.kernel_files import KernelFiles
from cuda_agent_cli.machine import pick_device
from cuda_agent_cli.model.factory import make_model
from cuda_agent_cli.run.cases import CaseOutcome, ShapesVerdict, decide, judge_more
from cuda_agent_cli.run.checks import captured_block, check_input_devices, check_limits, check_model
from cuda_agent_cli.run.settings import SavedTask, load_task, refuse_changes_on_resume, save_task
from cuda_agent_cli.sandbox import SandboxPolicy, open_sandbox, require_sandbox
from cuda_agent_cli.task.inputs import CallSpec, call_from_json, call_to_json, parse_inputs_cases
from cuda_agent_cli.task.reference import reference_source
from cuda_agent_cli.task.resolve import resolve_task
from cuda_agent_cli.task.target import Task, repository_of
from cuda_agent_cli.workspace import cache_dir, create_workspace, open_workspace
from cuda_agent_cli.writeback.apply import WriteBackPlan
from cuda_agent_cli.writeback.deploy import Deployment, measure_deployment
from cuda_agent_cli.writeback.fingerprint import integration_present, unpatched_candidates
from cuda_agent_cli.writeback.plan import plan_for_session
from cuda_agent_cli.writeback.refusal import check_paths_early, refuse_before_session


@dataclass(frozen=True)
class ApplyIntent:
    """The front door means to apply the kernel at the end: its rules are checked before the session."""

    commit: bool = True
    allow_dirty: bool = False


@dataclass(frozen=True)
class GivenReference:
    """A task that is its own reference, as a bench suite's problem is (`class Model`,
    `get_inputs()` and `get_init_inputs()` in one source): nothing to import or resolve, and,
    with no module of a repository behind it, nothing to write back or resume."""

    name: str  # what the session and its first message call it: the suite's task key
    source: str  # the workspace's model.py


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
    apply: ApplyIntent | None = None  # None: review only, nothing to refuse early
    brief: str | None = None  # more for the first message: why this session runs (check --fix)
    start_from: Path | None = None  # a kernel folder (model_new.py, kernels/) the new workspace starts with
    reference: GivenReference | None = None  # the task itself, instead of a target (bench)
    # Settings the caller resolved (bench: its own flags, the same on every node it runs on);
    # None: load_config over cwd with the flags above.
    config: Config | None = None
    trials: int | None = None  # timed trials of each profile; None: the harness's default
    reward_baseline: str | None = None  # "paper" or "best"; None: the configuration's
    precision: str | None = None  # tools/precision.py's mode; None: the configuration's
    command: str = "optimize"  # the command the session's settings record
    # Try the planned kernel in the user's setting before the review (build, checks, time per call).
    measure_deployment: bool = True

    @property
    def resuming(self) -> bool:
        return bool(self.resume or self.continue_latest)


@dataclass
class OptimizeOutcome:
    session_id: str
    transcript: Path
    status: str  # improved | correct | failed
    stop_reason: str
    turns: int
    cost_usd: float
    device: str
    policy: Policy
    target: str
    best: HarnessResult | None  # the best harness result, as its record keeps it
    best_dir: Path | None  # the snapshot of its files in the session store
    best_files: list[str] = field(default_factory=list)
    plan: WriteBackPlan | None = None  # when there is a correct kernel
    sandbox_banner: str | None = None
    stop_detail: str = ""  # e.g. "max_turns 3 from pyproject.toml"
    inputs: dict[str, Any] | None = None  # inputs_json of the call the kernel was made for
    harness: Harness | None = None  # the session's own, its builds warm: to score the best again (bench)
    shapes: ShapesVerdict | None = None  # every call of the task the best kernel was judged at (several)
    deployment: Deployment | None = None  # the kernel as the user's program will run it
    capture: str | None = None  # the command --capture ran, to time it once the kernel is applied
    capture_cwd: Path | None = None

    @property
    def result(self) -> HarnessResult | None:
        """The best result (`best`), by the name the review and the renderers read it."""
        return self.best

    @property
    def reward(self) -> int | None:
        return self.best.reward if self.best else None

    @property
    def timings(self) -> Timings | None:
        return self.best.timings if self.best else None


def status_of(best: HarnessResult | None) -> str:
    """improved: faster than eager by >5% (reward 2 or 3); correct: verified only; failed: none."""
    if best is None or not best.correct:
        return "failed"
    return "improved" if best.reward is not None and best.reward >= 2 else "correct"


def not_applied(outcome: OptimizeOutcome) -> str:
    """Why a correct kernel that is not `improved` is not applied: measured no faster than eager,
    or never timed at all (no Profile of it finished), which says nothing either way."""
    best = outcome.result
    if best is not None and best.correct and best.timings is None:
        return (
            "the kernel is correct but was not timed (no Profile of it finished) — "
            f"`cuda-agent optimize --resume {outcome.session_id}` times it"
        )
    return "the kernel is correct but not faster than eager PyTorch"


def exit_code_for(outcome: OptimizeOutcome) -> int:
    """0 when a correct kernel was found, 1 when not (README, Exit codes)."""
    return 0 if outcome.status in ("improved", "correct") else JobFailed.exit_code


def inputs_json(call: CallSpec) -> dict[str, Any]:
    """The call the session optimizes for, for --json: where it came from, as text and as data."""
    return {"text": call.describe(), **call_to_json(call)}


def resolve_config(req: OptimizeRequest) -> Config:
    """The settings of one run: those the caller resolved (`req.config`), else the request's
    repository's with its flags on top. Resolved once a run and passed down from there."""
    if req.config is not None:
        return req.config
    flags = {
        "model": req.model,
        "api_base": req.api_base,
        "device": req.device,
        "policy": req.policy,
        "max_turns": req.max_turns,
        "max_cost": req.max_cost,
        "timeout": req.timeout,
        "reward_baseline": req.reward_baseline,
        "precision": req.precision,
    }
    return load_config(flags, cwd=req.cwd)


def _data_dir(cfg: Config, data_dir: Path | None) -> Path | None:
    """The session store's folder: the one given, else the configured one (where `cuda-agent
    sessions` looks too); None for the default."""
    if data_dir is not None:
        return data_dir
    return Path(cfg.data_dir).expanduser() if cfg.data_dir else None


def _check_paths(req: OptimizeRequest, data_dir: Path | None) -> None:
    """Refuse, before anything runs, the paths that could not take what the session writes at its
    end: the session store, the build cache and, for a file target, the repository."""
    preflight.check_store(
        (data_dir or user_data_dir()) / "sessions",
        "data dir",
        "set XDG_DATA_HOME (or data_dir in the config) to a folder you can write to",
    )
    preflight.check_store(cache_dir(), "cache dir", "set XDG_CACHE_HOME to a folder you can write to")
    if req.target and "::" in req.target and req.apply is not None:
        module = (req.cwd / req.target.split("::", 1)[0]).expanduser()
        if module.is_file():  # else the import reports it, with its own hint
            check_paths_early(module, commit=req.apply.commit)


@dataclass
class _Start:
    """What a new or resumed session starts from."""

    cfg: Config
    task: Task | None  # the class in the repository; None for a given reference
    reference_source: str  # the workspace's model.py
    target_text: str  # the target as the session records it
    display: str  # what the first message and the outcome call it
    device: str
    policy: Policy
    state: SessionState | None  # None: a new session, made once the task is known to be good


def resumed_session(req: OptimizeRequest, data_dir: Path | None = None) -> SessionState:
    """The stored session a resuming request continues: its `--resume ID`, or (`--continue`) the
    latest optimize session of the repository `req.cwd` is in, in the session store
    `run_optimize` uses."""
    return _stored_session(req, _data_dir(resolve_config(req), data_dir))


def _stored_session(req: OptimizeRequest, data_dir: Path | None) -> SessionState:
    if req.resume:
        return resume_session(req.resume, data_dir)
    return resume_session(None, data_dir, repo=repository_of(req.cwd), chat=False)


def _resume(req: OptimizeRequest, cfg: Config, data_dir: Path | None, stage: Callable[[str], None]) -> _Start:
    state = _stored_session(req, data_dir)
    saved = load_task(state.session_dir)
    refuse_changes_on_resume(
        state.session_id, saved, device=req.device, policy=req.policy, inputs=req.inputs, capture=req.capture
    )
    cfg = cfg.with_session(saved.session_layer())
    _check_before_model(req, cfg)
    stage(f"resuming session {state.session_id}")
    task = as_written(
        resolve_task(
            saved.target,
            Path(saved.cwd),
            inputs=[call_from_json(c) for c, _ in saved.calls()] if saved.explicit_inputs else None,
            device=saved.device,
        )
    )
    task = with_counts(task, [n for _, n in saved.calls()])
    return _Start(
        cfg, task, task.reference_source, saved.target, task.target.display, saved.device, saved.policy, state
    )


def _new(req: OptimizeRequest, cfg: Config, stage: Callable[[str], None]) -> _Start:
    _check_before_model(req, cfg)
    if not req.target:
        raise BadInput("optimize needs a TARGET", "cuda-agent optimize path/to/file.py::ClassName")
    stage(f"importing {req.target}")
    specs = parse_inputs_cases(req.inputs) if req.inputs else None
    for spec in specs or []:
        check_input_devices(spec, cfg, "--inputs")
    task = as_written(resolve_task(req.target, req.cwd, inputs=specs, capture_command=req.capture, device=cfg.device))
    if req.capture:
        stage(captured_block(task, req.capture))
        check_input_devices(task.call, cfg, "--capture")
    # An explicit --device wins, then the device the inputs name, then what this machine has.
    device = pick_device(cfg.device or task.call.device())
    return _Start(cfg, task, task.reference_source, req.target, task.target.display, device, cfg.policy, None)


def _given(req: OptimizeRequest, reference: GivenReference, cfg: Config) -> _Start:
    """A reference as it is, on the configured device (else what this machine has)."""
    _check_before_model(req, cfg)
    device = pick_device(cfg.device)
    return _Start(cfg, None, reference.source, reference.name, reference.name, device, cfg.policy, None)


def with_counts(task: Task, counts: list[int | None]) -> Task:
    """The task with the calls' recorded counts (a resumed --capture session)."""
    if not counts:
        return task
    more = tuple(replace(c, count=n) for c, n in zip(task.more, counts[1:]))
    return replace(task, count=counts[0], more=more + task.more[len(more) :])


def as_written(task: Task) -> Task:
    """The task with its reference as the user wrote the class: a module where a kernel was
    integrated before (optimize again, check --fix) keeps the lines that hand the class to its
    loader out of model.py, whose copy could not find the loader's folder. The module's own text
    stays, since write-back replaces those lines; its recorded hash is the text without them."""
    if not integration_present(task.module_source, task.target.class_name):
        return task
    original = unpatched_candidates(task.module_source, task.target.class_name)[0]
    reference = reference_source(replace(task, module_source=original))
    return replace(task, reference_source=reference, module_sha256=hashlib.sha256(original.encode()).hexdigest())


def check_request(req: OptimizeRequest, data_dir: Path | None = None) -> None:
    """What every new session of `req` would refuse before its target is imported: the session
    store and the build cache, the settings and limits, the model, the sandbox. For a front door
    that starts several sessions with the same settings (optimize --all), so a bad --model is one
    error before the first target instead of the same error for each."""
    cfg = resolve_config(req)
    _check_paths(req, _data_dir(cfg, data_dir))
    _check_before_model(req, cfg)


def _check_before_model(req: OptimizeRequest, cfg: Config) -> None:
    check_limits(cfg)
    check_model(cfg.model, cfg.api_base)
    # Without shell tools nothing runs commands, so nothing needs confining.
    require_sandbox(req.allow_unsafe or not req.shell)


def run_optimize(
    req: OptimizeRequest,
    sink: Callable[[Any], None] | None = None,
    on_stage: Callable[[str], None] | None = None,
    data_dir: Path | None = None,
    cancel: Any = None,
) -> OptimizeOutcome:
    """Run (or resume) one optimize session and return its outcome with the write-back plan.

    With `req.apply` the write-back refusal rules are checked once the target is imported, before
    any model call, so nobody pays for a session that cannot land. `cancel` (a threading.Event)
    stops the agent from another thread, as Ctrl-C does."""
    stage = on_stage or (lambda _msg: None)
    cfg = resolve_config(req)
    data_dir = _data_dir(cfg, data_dir)
    _check_paths(req, data_dir)
    if req.reference is not None:
        start = _given(req, req.reference, cfg)
    else:
        start = _resume(req, cfg, data_dir, stage) if req.resuming else _new(req, cfg, stage)
    task = start.task
    if req.apply is not None and task is not None:
        refuse_before_session(
            task.file, task.target.repo_root, commit=req.apply.commit, allow_dirty=req.apply.allow_dirty
        )
    return _run_agent(req, start, data_dir, stage, sink, cancel)


def _run_agent(
    req: OptimizeRequest,
    start: _Start,
    data_dir: Path | None,
    stage: Callable[[str], None],
    sink: Callable[[Any], None] | None,
    cancel: Any,
) -> OptimizeOutcome:
    cfg, task, policy = start.cfg, start.task, start.policy
    stage("starting the harness")
    state = start.state
    if state is None:
        state = new_session(data_dir)
        # A kernel folder to start from (check --fix) seeds model_new.py and kernels/.
        seed = KernelFiles.read(req.start_from) if req.start_from is not None else KernelFiles()
        workspace = create_workspace(state.session_dir, start.reference_source, seed.model_new, seed.kernels)
    else:
        workspace = open_workspace(state.session_dir)
    harness = Harness(
        workspace,
        device=start.device,
        policy=policy,
        atol=cfg.atol,
        rtol=cfg.rtol,
        precision=cfg.precision,
        trials=req.trials,
        reward_baseline=cfg.reward_baseline,
    )
    _start_ahead(harness)
    device = harness.device
    # A new session records what --resume rebuilds the task from (a given reference has no target).
    if start.state is None and task is not None:
        save_task(
            state.session_dir,
            SavedTask(
                target=start.target_text,
                cwd=str(req.cwd),
                call=call_to_json(task.call),
                count=task.count,
                more=tuple({"call": call_to_json(c.call), "count": c.count} for c in task.more),
                explicit_inputs=not task.uses_module_inputs,
                device=device,
                policy=policy,
                model=cfg.model,
                api_base=cfg.api_base,
            ),
        )

    sandbox = open_sandbox(
        SandboxPolicy.optimize(workspace.root, list(workspace.locked)), req.allow_unsafe or not req.shell
    )
    toolbox = make_toolbox(ActionContext(sandbox, harness=harness), shell=req.shell)
    model = make_model(cfg.model, cfg.api_base)
    limits = Limits(
        max_turns=cfg.max_turns,
        max_cost=cfg.max_cost,
        timeout=cfg.timeout,
        context_tokens=cfg.context_tokens,
        origins={name: cfg.origin_phrase(name) for name in ("max_turns", "max_cost", "timeout")},
    )
    settings: dict[str, Any] = {
        "device": device,
        "policy": policy,
        "max_turns": cfg.max_turns,
        "max_cost": cfg.max_cost,
        "timeout": cfg.timeout,
        "command": req.command,
    }
    notes = None
    if task is not None:
        settings["repo"] = str(task.target.repo_root)  # what `sessions` shows and `--continue` matches
        settings["inputs"] = task.call.describe()
        if not task.uses_module_inputs:
            notes = f"Inputs: {task.call.describe()}. Device: {device}. Policy: {policy}."
    if req.brief:
        notes = f"{notes}\n\n{req.brief}" if notes else req.brief
    stage("running the agent")
    try:
        result = run_agent(
            model,
            toolbox,
            state=state,
            prompt=None
            if start.state is not None
            else task_message(start.display, start.reference_source, _with_shapes(notes, task)),
            system_prompt=build_system_prompt(device=device, policy=policy, gpu=harness.environment().get("gpu")),
            target=start.target_text,
            settings=settings,
            workspace_root=workspace.root,
            limits=limits,
            sink=sink,
            cancel=cancel,
        )
    finally:
        toolbox.close()

    best = result.best.result if result.best else None
    best_dir = Path(result.best.snapshot) if result.best and result.best.snapshot else None
    outcome = OptimizeOutcome(
        session_id=result.session_id,
        transcript=result.transcript,
        status="failed",
        stop_reason=result.stop_reason,
        turns=result.turns,
        cost_usd=result.cost_usd,
        device=device,
        policy=policy,
        target=start.display,
        best=best,
        best_dir=best_dir,
        sandbox_banner=sandbox.banner if req.shell else None,
        stop_detail=result.detail,
        inputs=inputs_json(task.call) if task is not None else None,
        harness=harness,
        capture=req.capture,
        capture_cwd=req.cwd,
    )
    outcome.status = status_of(best)
    if best_dir is not None and best is not None and best.correct:
        files = KernelFiles.read(best_dir)
        outcome.best_files = [str(best_dir / rel) for rel in sorted(files.files)]
        if task is not None:
            if task.more:
                outcome.shapes = _judge_shapes(task, files, best, device, policy, cfg, req, stage)
            shapes = outcome.shapes
            used = shapes.used_calls() if shapes else None
            record = shapes.manifest() if shapes else {}

            def plan() -> WriteBackPlan:
                return plan_for_session(
                    task, files, workspace.binding_dir, device, policy, best, result.session_id, used, record
                )

            outcome.plan = plan()
            if req.measure_deployment:
                outcome.deployment = _deployment(task, outcome.plan, stage)
                record.update(outcome.deployment.manifest())
                outcome.plan = plan()
    return outcome


def _deployment(task: Task, plan: WriteBackPlan, stage: Callable[[str], None]) -> Deployment:
    """The planned kernel tried in the user's repository: built where their program loads it,
    every verified family checked there, and timed per call as their Python calls it."""
    stage("trying the kernel as your program will call it (building it where your program loads it)")
    return measure_deployment(
        plan.folder_files,
        repo_root=task.target.repo_root,
        import_paths=list(task.target.import_paths),
        module=task.target.module_name,
        class_name=task.target.class_name,
    )


def _judge_shapes(
    task: Task,
    files: KernelFiles,
    best: HarnessResult,
    device: str,
    policy: Policy,
    cfg: Config,
    req: OptimizeRequest,
    stage: Callable[[str], None],
) -> ShapesVerdict:
    """The best kernel judged at the task's further calls, and which of them it will run for."""
    judged = judge_more(
        task,
        files,
        device=device,
        policy=policy,
        atol=cfg.atol,
        rtol=cfg.rtol,
        trials=req.trials,
        stage=stage,
        precision=cfg.precision,
    )
    cases = [CaseOutcome(task.call, task.count, best, first=True)]
    cases += [CaseOutcome(case.call, case.count, result, note=note) for case, result, note in judged]
    verdict = decide(cases)
    # The call the session optimized for is integrated as it always is; the user sees its reward.
    first = cases[0].family
    for c in cases:
        if c.family == first:
            c.used = True
    verdict.families[first] = True
    verdict.reasons.pop(first, None)
    return verdict


def _with_shapes(notes: str | None, task: Task | None) -> str | None:
    """The first message names the other calls the kernel will be judged at, so the agent writes
    a kernel for all of them, not for the first shape alone."""
    if task is None or not task.more:
        return notes
    lines = [
        "When the session ends, the best kernel is also verified and timed at these calls "
        "(it runs only at those where it is correct and not slower than eager):"
    ]
    lines += [f"- {c.call.describe()}" + (f" ({c.count} calls)" if c.count is not None else "") for c in task.more]
    text = "\n".join(lines)
    return f"{notes}\n\n{text}" if notes else text


def _start_ahead(harness: Any) -> None:
    """On a GPU, the worker and the warm baselines are ready by the time the model has written
    its first kernel. Not on the CPU: the worker is up already (the harness probed its threads),
    and torch.compile's warm-up would take the cores the session itself runs on."""
    if harness.device == "cuda":
        harness.start_ahead()

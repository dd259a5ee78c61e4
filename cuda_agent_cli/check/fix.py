"""`check --fix`: run the agent, unattended, on every kernel the check failed, and hand the fixes
back as a patch or as one commit on a new branch, never on the user's own branch or tree.

Each kernel gets one optimize session through the one session runner (`run.optimize.run_optimize`),
started from the kernel's current files and told why it is being redone. The sessions run in a
scratch worktree (writeback.scratch), where each accepted fix is applied before the next session
starts, so the manifest and a module shared by two kernels come out right.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from cuda_agent_cli.check.status import FAILING, Status
from cuda_agent_cli.errors import BadInput, CudaAgentError, Interrupted

PATCH_NAME = "cuda-agent-fix.patch"


@dataclass
class FixRequest:
    model: str | None = None
    api_base: str | None = None
    max_turns: int | None = None
    max_cost: float | None = None  # USD, for all the sessions of this run together
    timeout: float | None = None  # seconds, per session
    allow_unsafe: bool = False
    patch_dir: Path | None = None  # None: one commit on a new branch
    summary: Path | None = None


@dataclass
class KernelFix:
    target: str
    before: str  # the check's status
    problem: str  # the check's message
    fixed: bool = False
    attempted: bool = False  # a session ran (or was due) for it
    done: str = ""  # what was done, or why it could not be fixed
    session_id: str | None = None
    reward: int | None = None
    timings: dict[str, Any] | None = None
    cost_usd: float = 0.0
    written: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "before": self.before,
            "problem": self.problem,
            "fixed": self.fixed,
            "attempted": self.attempted,
            "done": self.done,
            "session_id": self.session_id,
            "reward": self.reward,
            "timings": self.timings,
            "cost_usd": round(self.cost_usd, 6),
            "written": self.written,
        }


@dataclass
class FixReport:
    kernels: list[KernelFix]
    branch: str | None = None
    commit: str | None = None
    patch: Path | None = None
    cost_usd: float = 0.0

    @property
    def exit_code(self) -> int:
        """0 when every kernel that failed the check has a fix, 1 when one is left."""
        return 1 if any(not k.fixed for k in self.kernels if k.before in {s.value for s in FAILING}) else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "kernels": [k.to_json() for k in self.kernels],
            "branch": self.branch,
            "commit": self.commit,
            "patch": str(self.patch) if self.patch else None,
            "cost_usd": round(self.cost_usd, 6),
            "exit_code": self.exit_code,
        }


# ---------------------------------------------------------------- before anything runs


def check_fix_request(req: FixRequest, root: Path, manifest_paths: list[str]) -> None:
    """Every reason the fix could not run or land, as one line and exit 2 (3 for a missing
    environment), before the check or a session starts."""
    from cuda_agent_cli.config import load_config
    from cuda_agent_cli.run.checks import check_limits, check_model
    from cuda_agent_cli.sandbox import require_sandbox

    cfg = load_config(
        {
            "model": req.model,
            "api_base": req.api_base,
            "max_turns": req.max_turns,
            "max_cost": req.max_cost,
            "timeout": req.timeout,
        },
        cwd=root,
    )
    if not cfg.model:
        raise BadInput(
            "--fix runs the agent, and no model is configured",
            "pass --model (e.g. anthropic/claude-sonnet-4-5), set CUDA_AGENT_MODEL, or set model in [tool.cuda-agent]",
        )
    check_model(cfg.model, cfg.api_base)
    check_limits(cfg)
    if req.patch_dir is not None:
        _check_patch_dir(req.patch_dir)
    if req.summary is not None:
        _check_summary(req.summary)
    from cuda_agent_cli.writeback.git import git_root

    if git_root(root) is None:
        raise BadInput(
            f"{root} is not a git repository: --fix needs one for its scratch copy",
            "run `git init` and commit the repository first",
        )
    if req.patch_dir is None:
        from cuda_agent_cli.writeback.scratch import dirty_tree

        dirty = dirty_tree(root, manifest_paths)
        if dirty:
            shown = ", ".join(dirty[:3]) + (" ..." if len(dirty) > 3 else "")
            raise BadInput(
                f"uncommitted changes in {shown}: --fix commits on a new branch made from HEAD, "
                "which would leave them out",
                "commit or stash them, or write a patch with --patch DIR",
            )
    require_sandbox(req.allow_unsafe)


def _check_patch_dir(path: Path) -> None:
    from cuda_agent_cli.preflight import cannot_create

    if path.exists() and not path.is_dir():
        raise BadInput(f"--patch {path} is a file", "pass --patch with a new or empty folder")
    if path.is_dir() and any(path.iterdir()):
        raise BadInput(f"--patch {path} is not empty", "pass --patch with a new or empty folder")
    problem = cannot_create(path)
    if problem:
        raise BadInput(f"--patch {path} cannot be used: {problem}", "pass --patch with a folder you can write to")


def _check_summary(path: Path) -> None:
    from cuda_agent_cli.preflight import cannot_write_in

    if path.is_dir():
        raise BadInput(f"--summary {path} is a folder", f"give a file name, such as --summary {path / 'fix.md'}")
    if path.is_file() and path.stat().st_size > 0:
        raise BadInput(f"--summary {path} already exists", "remove it, or choose another file name")
    folder = path.parent if str(path.parent) else Path(".")
    problem = cannot_write_in(folder) if folder.is_dir() else f"the folder {folder} does not exist"
    if problem:
        raise BadInput(f"--summary {path} cannot be written: {problem}", "choose a path in a folder you can write to")


# ---------------------------------------------------------------- the sessions


def _brief(status: str, problem: str) -> str:
    return (
        "This kernel was integrated into the repository before, and `cuda-agent check` now reports it "
        f"{status}: {problem}. Its files from then are in the workspace (model_new.py, kernels/). "
        "Re-verify it against the reference as it is now; re-tune it if it is slower than recorded, "
        "or rewrite it where it no longer compiles, fails verification or no longer matches the reference."
    )


def _what_changed(plan: Any) -> list[str]:
    """The kernel's own sources (model_new.py, kernels/) the fix changes, folder-relative."""
    prefix = plan.folder + "/"
    return sorted(
        c.path[len(prefix) :]
        for c in plan.changes
        if c.path.startswith(prefix) and c.path[len(prefix) :].split("/")[0] in ("model_new.py", "kernels")
    )


def speeds(t: dict[str, Any] | None) -> str:
    """ "1.52x [1.40, 1.63] vs eager, 1.10x [1.02, 1.18] vs torch.compile" from harness timings."""
    if not t:
        return "not timed"
    out = []
    for label, key in (("eager", "speedup_vs_eager"), ("torch.compile", "speedup_vs_compile")):
        iv = t.get(f"{key}_interval")
        spread = f" [{iv[0]:.2f}, {iv[1]:.2f}]" if iv else ""
        out.append(f"{t[key]:.2f}x{spread} vs {label}")
    return ", ".join(out)


def _fix_one(
    k: Any,
    entry: dict[str, Any],
    tree: Any,
    req: FixRequest,
    budget: float | None,
    sink: Callable[[Any], None] | None,
    on_stage: Callable[[str], None] | None,
) -> KernelFix:
    from cuda_agent_cli.run.optimize import ApplyIntent, OptimizeRequest, run_optimize
    from cuda_agent_cli.writeback.apply import apply_plan

    fix = KernelFix(target=k.target, before=k.status.value, problem=k.message(), attempted=True)
    spec = entry.get("inputs") if entry.get("inputs_source") != "get_inputs" else None
    opt = OptimizeRequest(
        target=str(entry["target"]),
        cwd=tree.root,
        model=req.model,
        api_base=req.api_base,
        device=entry.get("device") or None,
        policy=entry.get("policy") or None,
        inputs=spec or None,
        max_turns=req.max_turns,
        max_cost=budget,
        timeout=req.timeout,
        allow_unsafe=req.allow_unsafe,
        apply=ApplyIntent(commit=False, allow_dirty=True),
        brief=_brief(fix.before, fix.problem),
        start_from=tree.root / entry["folder"] if entry.get("folder") else None,
    )
    try:
        outcome = run_optimize(opt, sink=sink, on_stage=on_stage)
    except Interrupted:
        raise
    except CudaAgentError as exc:
        fix.done = f"could not be fixed: {exc.one_line()}"
        return fix
    fix.session_id, fix.cost_usd, fix.reward = outcome.session_id, outcome.cost_usd, outcome.reward
    t = outcome.timings
    fix.timings = t.to_json() if t else None
    if outcome.plan is None:
        fix.done = f"could not be fixed: no correct kernel in the session (stopped: {outcome.stop_detail or outcome.stop_reason})"
        return fix
    if outcome.status != "improved":
        fix.done = (
            "could not be fixed: the best kernel verifies but was not timed (no Profile of it finished)"
            if fix.timings is None
            else f"could not be fixed: the best kernel verifies but is not faster than eager PyTorch ({speeds(fix.timings)})"
        )
        return fix
    changed = _what_changed(outcome.plan)
    applied = apply_plan(outcome.plan, commit=False, allow_dirty=True)
    fix.fixed, fix.written = True, applied.written
    how = (
        f"rewritten ({', '.join(changed)} changed)"
        if changed
        else "re-verified and re-timed on this machine (its sources are unchanged)"
    )
    fix.done = f"{how}; reward {outcome.reward}"
    return fix


def run_fix(
    req: FixRequest,
    report: Any,
    *,
    sink: Callable[[Any], None] | None = None,
    on_stage: Callable[[str], None] | None = None,
    on_kernel: Callable[[KernelFix], None] | None = None,
) -> FixReport:
    """A session for each kernel of `report` (a CheckReport) with a failing status; then the patch
    or the branch. NOT-MEASURED and IMPROVED kernels are listed with why nothing was done."""
    from cuda_agent_cli.config import load_config
    from cuda_agent_cli.writeback.manifest import load_manifest
    from cuda_agent_cli.writeback.scratch import new_branch, scratch_tree

    out = FixReport(kernels=[])
    entries = (
        {str(e["target"]): e for e in load_manifest(report.manifest.read_text()).kernels} if report.manifest else {}
    )
    todo = [k for k in report.kernels if k.effective in FAILING and k.target in entries]
    for k in report.kernels:
        if k not in todo:
            out.kernels.append(KernelFix(k.target, k.status.value, k.message(), done=_nothing_to_do(k.effective)))
    if not todo:
        return out
    total = load_config({"max_cost": req.max_cost}, cwd=report.root).max_cost
    written: list[str] = []
    with scratch_tree(report.root, with_working_tree=req.patch_dir is not None) as tree:
        for k in todo:
            budget = None if total is None else total - out.cost_usd
            if budget is not None and budget <= 0:
                fix = KernelFix(
                    k.target,
                    k.status.value,
                    k.message(),
                    attempted=True,
                    done=f"not attempted: the --max-cost budget of {total:g} USD was spent",
                )
            else:
                fix = _fix_one(k, entries[k.target], tree, req, budget, sink, on_stage)
            out.cost_usd += fix.cost_usd
            written += fix.written
            out.kernels.append(fix)
            if on_kernel is not None:
                on_kernel(fix)
        if written:
            fixed = [f for f in out.kernels if f.fixed]
            commit = tree.commit(sorted(set(written)), _message(fixed))
            if req.patch_dir is not None:
                req.patch_dir.mkdir(parents=True, exist_ok=True)
                out.patch = req.patch_dir / PATCH_NAME
                out.patch.write_text(tree.diff(commit))
            else:
                out.branch, out.commit = new_branch(report.root, commit), commit
    order = {k.target: i for i, k in enumerate(report.kernels)}
    out.kernels.sort(key=lambda f: order.get(f.target, 0))
    return out


def _nothing_to_do(status: Status) -> str:
    if status == Status.NOT_MEASURED:
        return "nothing done: it cannot be measured on this machine, so no fix could be verified here"
    if status == Status.IMPROVED:
        return "nothing done: it is faster than recorded (`cuda-agent check --update` records it)"
    return "nothing to fix"


def _message(fixed: list[KernelFix]) -> str:
    names = ", ".join(f.target.rpartition("::")[2] or f.target for f in fixed)
    lines = [f"cuda-agent check --fix: {names}", ""]
    lines += [
        f"- {f.target} ({f.before}): {f.done}, {speeds(f.timings)}"
        + (f" [session {f.session_id}]" if f.session_id else "")
        for f in fixed
    ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- the PR comment


def markdown(fix: FixReport) -> str:
    """The summary for a pull request comment: per kernel, the status before, what was done, the
    new speedups with their intervals, or why it could not be fixed."""
    fixed = sum(k.fixed for k in fix.kernels)
    lines = ["## cuda-agent check --fix", ""]
    if fix.branch:
        lines.append(
            f"{fixed} of {len(fix.kernels)} kernel(s) fixed on branch `{fix.branch}` ({fix.commit[:12] if fix.commit else ''})."
        )
    elif fix.patch:
        lines.append(
            f"{fixed} of {len(fix.kernels)} kernel(s) fixed in `{fix.patch.name}` (`git apply {fix.patch.name}`)."
        )
    else:
        lines.append(f"{fixed} of {len(fix.kernels)} kernel(s) fixed.")
    lines += [
        "",
        "| kernel | before | result | vs eager | vs torch.compile | what was done |",
        "|---|---|---|---|---|---|",
    ]
    for k in fix.kernels:
        t = k.timings or {}
        cells = []
        for key in ("speedup_vs_eager", "speedup_vs_compile"):
            iv = t.get(f"{key}_interval")
            cells.append(f"{t[key]:.2f}x" + (f" [{iv[0]:.2f}, {iv[1]:.2f}]" if iv else "") if key in t else "-")
        result = "fixed" if k.fixed else "not fixed" if k.attempted else "no action"
        lines.append(f"| `{k.target}` | {k.before} | {result} | {cells[0]} | {cells[1]} | {_cell(k.done)} |")
    lines += ["", f"Model cost: ${fix.cost_usd:.2f}."]
    sessions = [k.session_id for k in fix.kernels if k.session_id]
    if sessions:
        lines.append("Sessions: " + ", ".join(f"`{s}`" for s in sessions) + " (`cuda-agent sessions`).")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")

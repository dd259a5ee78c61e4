"""`cuda-agent check [PATH]...` (pre-merge guard for integrated kernels) and `cuda-agent build [PATH]`."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from cuda_agent_cli.cli.options import ApiBaseOpt, JsonOpt, MaxTurnsOpt, ModelOpt, TimeoutOpt, UnsafeOpt
from cuda_agent_cli.errors import BadInput


def check(
    paths: Annotated[
        Optional[list[Path]],
        typer.Argument(
            help="The repository (default: the current folder), or files in it: only kernels they belong to are checked."
        ),
    ] = None,
    fast: Annotated[
        bool, typer.Option("--fast", help="Static checks only: hashes, staleness, architecture (no compile, no GPU).")
    ] = False,
    threshold: Annotated[
        Optional[str],
        typer.Option(
            "--threshold",
            help="Smallest drop that counts as a regression, e.g. 0.05 or 5% (default 5%, or [tool.cuda-agent.check] threshold).",
        ),
    ] = None,
    changed_since: Annotated[
        Optional[str],
        typer.Option("--changed-since", help="Only kernels whose reference or sources changed since this git ref."),
    ] = None,
    strict: Annotated[bool, typer.Option("--strict", help="NOT-MEASURED fails the check too.")] = False,
    update: Annotated[
        bool, typer.Option("--update", help="Refresh the record of every kernel that verified and timed here.")
    ] = False,
    as_json: JsonOpt = False,
    junit: Annotated[
        Optional[Path], typer.Option("--junit", help="Write JUnit XML (one testcase per kernel) to FILE.")
    ] = None,
    github: Annotated[
        bool,
        typer.Option("--github", help="Print GitHub annotations; append a Markdown summary to $GITHUB_STEP_SUMMARY."),
    ] = False,
    sarif: Annotated[Optional[Path], typer.Option("--sarif", help="Write SARIF 2.1.0 to FILE.")] = None,
    fix: Annotated[
        bool,
        typer.Option(
            "--fix", help="Run the agent on every failing kernel; commit the fixes on a new branch (or --patch DIR)."
        ),
    ] = False,
    patch: Annotated[
        Optional[Path],
        typer.Option(
            "--patch",
            help="With --fix: write the fixes as a git-apply-able patch into this new or empty folder instead of committing.",
        ),
    ] = None,
    summary: Annotated[
        Optional[Path],
        typer.Option(
            "--summary",
            help="With --fix: write a Markdown summary for a pull request comment to FILE "
            "(appended to $GITHUB_STEP_SUMMARY too, when that is set).",
        ),
    ] = None,
    model: ModelOpt = None,
    api_base: ApiBaseOpt = None,
    max_turns: MaxTurnsOpt = None,
    max_cost: Annotated[
        Optional[float],
        typer.Option("--max-cost", help="With --fix: stop when the fix sessions together have cost this many USD."),
    ] = None,
    timeout: TimeoutOpt = None,
    unsafe_no_sandbox: UnsafeOpt = False,
) -> None:
    """Tell for each integrated kernel whether it is still correct, current and fast on this machine."""
    from cuda_agent_cli.check import report as render
    from cuda_agent_cli.check.runner import CheckRequest, run_check

    for label, target in (("--junit", junit), ("--sarif", sarif)):
        if target is not None and (target.is_dir() or not _writable_parent(target)):
            raise BadInput(f"{label} {target}: cannot write a file there", "pass a file path in a writable folder")
    req = CheckRequest(
        paths=list(paths or []),
        cwd=Path.cwd(),
        fast=fast,
        threshold=threshold,
        changed_since=changed_since,
        strict=strict,
        update=update,
    )
    fix_req = _fix_request(req, fix, patch, summary, model, api_base, max_turns, max_cost, timeout, unsafe_no_sandbox)

    def progress(k) -> None:
        if not as_json:
            typer.echo(f"  {k.status.value:<20} {k.target} ({k.seconds:.1f} s)", err=True)

    result = run_check(req, on_kernel=None if fast else progress)
    fixed = _run_fix(fix_req, result) if fix_req is not None else None
    if junit is not None:
        junit.write_text(render.junit(result))
    if sarif is not None:
        sarif.write_text(render.sarif(result))
    if github:
        for line in render.github_annotations(result):
            typer.echo(line)
    # The job summary of GitHub Actions: the check's own with --github; what --fix did whenever
    # the variable is set, since nobody watches an unattended fix run but that page.
    parts = [render.markdown_summary(result)] if github else []
    if fixed is not None:
        from cuda_agent_cli.check.fix import markdown

        parts.append(markdown(fixed))
    _append_step_summary(parts)
    if as_json:
        typer.echo(
            render.to_json(result) if fixed is None else json.dumps({**result.to_json(), "fix": fixed.to_json()})
        )
    else:
        out = sys.stderr if github else sys.stdout
        for line in render.table(result):
            print(line, file=out)
        if fixed is not None:
            _print_fix(fixed, out)
    raise typer.Exit(result.exit_code if fixed is None else fixed.exit_code)


def _fix_request(
    req: Any,
    fix: bool,
    patch: Path | None,
    summary: Path | None,
    model: str | None,
    api_base: str | None,
    max_turns: int | None,
    max_cost: float | None,
    timeout: float | None,
    unsafe: bool,
) -> Any:
    """The --fix request, checked before the check runs; None without --fix."""
    from cuda_agent_cli.check.fix import FixRequest, check_fix_request
    from cuda_agent_cli.check.runner import locate
    from cuda_agent_cli.writeback.manifest import MANIFEST_PATH, load_manifest

    if not fix:
        given = [
            flag
            for flag, value in (
                ("--patch", patch),
                ("--summary", summary),
                ("--model", model),
                ("--api-base", api_base),
                ("--max-turns", max_turns),
                ("--max-cost", max_cost),
                ("--timeout", timeout),
            )
            if value is not None
        ]
        if given or unsafe:
            raise BadInput(f"{(given or ['--unsafe-no-sandbox'])[0]} only applies to --fix", "add --fix, or drop it")
        return None
    if req.update:
        raise BadInput("--update rewrites the record in place and --fix writes a branch or a patch", "pass one of them")
    root, manifest, _ = locate(req.paths, req.cwd)
    if manifest is None:
        raise BadInput(
            f"no {MANIFEST_PATH} in {root}: no integrated kernels to fix",
            "run it in a repository where `cuda-agent optimize` applied a kernel",
        )
    entries = load_manifest(manifest.read_text()).kernels
    paths = [MANIFEST_PATH, *(str(e[k]) for e in entries for k in ("module_file", "folder") if e.get(k))]
    fr = FixRequest(
        model=model,
        api_base=api_base,
        max_turns=max_turns,
        max_cost=max_cost,
        timeout=timeout,
        allow_unsafe=unsafe,
        patch_dir=patch.expanduser().resolve() if patch else None,
        summary=summary.expanduser().resolve() if summary else None,
    )
    check_fix_request(fr, root, paths)
    return fr


def _run_fix(fr: Any, result: Any) -> Any:
    from cuda_agent_cli.check.fix import markdown, run_fix, speeds
    from cuda_agent_cli.cli import render

    progress: Any = render.PlainProgress(sys.stderr)

    def done(k: Any) -> None:
        typer.echo(
            f"  {'fixed' if k.fixed else 'NOT FIXED':<10} {k.target}: {k.done}"
            + (f", {speeds(k.timings)}" if k.fixed else ""),
            err=True,
        )

    fixed = run_fix(fr, result, sink=progress, on_stage=progress.stage, on_kernel=done)
    if fr.summary is not None:
        fr.summary.write_text(markdown(fixed))
    return fixed


def _print_fix(fixed: Any, out: Any) -> None:
    if fixed.branch:
        print(
            f"fixes committed on the new branch {fixed.branch} ({fixed.commit[:12]}); your branch and working "
            f"tree are as they were: git diff HEAD {fixed.branch}",
            file=out,
        )
    elif fixed.patch:
        print(f"fixes written to {fixed.patch}: git apply {fixed.patch}", file=out)
    else:
        print("nothing was fixed", file=out)


def _append_step_summary(parts: list[str]) -> None:
    """Add Markdown to $GITHUB_STEP_SUMMARY, after what earlier commands of the step wrote there,
    with a blank line before each part. A file that cannot take it is one warning: the check's
    result and the fix's branch or patch stand without it."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path or not parts:
        return
    try:
        with open(path, "a", encoding="utf-8") as f:
            for text in parts:
                if f.tell():
                    f.write("\n")
                f.write(text)
    except OSError as exc:
        typer.echo(f"warning: could not append to $GITHUB_STEP_SUMMARY ({path}): {exc.strerror or exc}", err=True)


def _writable_parent(path: Path) -> bool:
    parent = (path.parent if str(path.parent) else Path(".")).resolve()
    while not parent.exists():
        parent = parent.parent
    return os.access(parent, os.W_OK)


def build(
    path: Annotated[Optional[Path], typer.Argument(help="The repository (default: the current folder).")] = None,
    device: Annotated[
        Optional[str], typer.Option("--device", help="Build only the kernels for this device (cuda or cpu).")
    ] = None,
    cache_dir: Annotated[
        Optional[Path],
        typer.Option("--cache-dir", help="Build into DIR; set CUDA_AGENT_KERNEL_CACHE=DIR where the code runs."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Build every integrated kernel ahead of time (a Dockerfile or CI step), so no first call waits."""
    import json

    from cuda_agent_cli.check.build import build_exit_code, build_kernels
    from cuda_agent_cli.check.runner import locate
    from cuda_agent_cli.machine import this_machine
    from cuda_agent_cli.writeback.manifest import MANIFEST_PATH, load_manifest

    if device is not None and device not in ("cuda", "cpu"):
        raise BadInput(f"unknown device {device!r}", "use --device cuda or --device cpu")
    root, manifest, _ = locate([path] if path else [], Path.cwd())
    if manifest is None:
        raise BadInput(
            f"no {MANIFEST_PATH} in {root}: no integrated kernels to build",
            "run it in a repository where `cuda-agent optimize` applied a kernel",
        )
    if cache_dir is not None:
        cache_dir = cache_dir.resolve()
        if not _writable_parent(cache_dir / "x"):
            raise BadInput(f"--cache-dir {cache_dir}: not writable", "pass a folder you can write")
    entries = [e for e in load_manifest(manifest.read_text()).kernels if device is None or e.get("device") == device]

    def start(entry) -> None:
        if not as_json:
            typer.echo(f"building {entry['target']} ({entry.get('device') or 'cuda'}) ...", err=True)

    def done(r) -> None:
        if as_json:
            return
        if r.ok:
            typer.echo(
                f"  {'built in ' + format(r.seconds, '.1f') + ' s' if r.built else 'already built'}: {r.library}",
                err=True,
            )
        else:
            typer.echo(f"  FAILED: {r.error}", err=True)

    results = build_kernels(root, entries, this_machine(), cache_dir=cache_dir, on_start=start, on_done=done)
    code = build_exit_code(results)
    if as_json:
        typer.echo(json.dumps({"root": str(root), "exit_code": code, "kernels": [r.to_json() for r in results]}))
    else:
        ok = sum(r.ok for r in results)
        typer.echo(f"{ok} of {len(results)} kernel(s) ready" + (f" in {cache_dir}" if cache_dir else ""))
    raise typer.Exit(code)

"""`cuda-agent check [PATH]...` (pre-merge guard for integrated kernels) and `cuda-agent build [PATH]`."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from cuda_agent_cli.cli.options import JsonOpt


def check(
    paths: Annotated[Optional[list[Path]], typer.Argument(help="The repository (default: the current folder), or files in it: only kernels they belong to are checked.")] = None,
    fast: Annotated[bool, typer.Option("--fast", help="Static checks only: hashes, staleness, architecture (no compile, no GPU).")] = False,
    threshold: Annotated[Optional[str], typer.Option("--threshold", help="Smallest drop that counts as a regression, e.g. 0.05 or 5% (default 5%, or [tool.cuda-agent.check] threshold).")] = None,
    changed_since: Annotated[Optional[str], typer.Option("--changed-since", help="Only kernels whose reference or sources changed since this git ref.")] = None,
    strict: Annotated[bool, typer.Option("--strict", help="NOT-MEASURED fails the check too.")] = False,
    update: Annotated[bool, typer.Option("--update", help="Refresh the record of every kernel that verified and timed here.")] = False,
    as_json: JsonOpt = False,
    junit: Annotated[Optional[Path], typer.Option("--junit", help="Write JUnit XML (one testcase per kernel) to FILE.")] = None,
    github: Annotated[bool, typer.Option("--github", help="Print GitHub annotations; write a Markdown summary to $GITHUB_STEP_SUMMARY.")] = False,
    sarif: Annotated[Optional[Path], typer.Option("--sarif", help="Write SARIF 2.1.0 to FILE.")] = None,
) -> None:
    """Tell for each integrated kernel whether it is still correct, current and fast on this machine."""
    from cuda_agent_cli.check import report as render
    from cuda_agent_cli.check.runner import CheckRequest, run_check
    from cuda_agent_cli.errors import BadInput

    for label, target in (("--junit", junit), ("--sarif", sarif)):
        if target is not None and (target.is_dir() or not _writable_parent(target)):
            raise BadInput(f"{label} {target}: cannot write a file there", "pass a file path in a writable folder")
    req = CheckRequest(paths=list(paths or []), cwd=Path.cwd(), fast=fast, threshold=threshold,
                       changed_since=changed_since, strict=strict, update=update)

    def progress(k) -> None:
        if not as_json:
            typer.echo(f"  {k.status.value:<20} {k.target} ({k.seconds:.1f} s)", err=True)

    result = run_check(req, on_kernel=None if fast else progress)
    if junit is not None:
        junit.write_text(render.junit(result))
    if sarif is not None:
        sarif.write_text(render.sarif(result))
    if github:
        for line in render.github_annotations(result):
            typer.echo(line)
        summary = os.environ.get("GITHUB_STEP_SUMMARY")
        if summary:
            with open(summary, "a", encoding="utf-8") as f:
                f.write(render.markdown_summary(result))
    if as_json:
        typer.echo(render.to_json(result))
    else:
        out = sys.stderr if github else sys.stdout
        for line in render.table(result):
            print(line, file=out)
    raise typer.Exit(result.exit_code)


def _writable_parent(path: Path) -> bool:
    parent = (path.parent if str(path.parent) else Path(".")).resolve()
    while not parent.exists():
        parent = parent.parent
    return os.access(parent, os.W_OK)


def build(
    path: Annotated[Optional[Path], typer.Argument(help="The repository (default: the current folder).")] = None,
    device: Annotated[Optional[str], typer.Option("--device", help="Build only the kernels for this device (cuda or cpu).")] = None,
    cache_dir: Annotated[Optional[Path], typer.Option("--cache-dir", help="Build into DIR; set CUDA_AGENT_KERNEL_CACHE=DIR where the code runs.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Build every integrated kernel ahead of time (a Dockerfile or CI step), so no first call waits."""
    import json

    from cuda_agent_cli.check.prebuild import build_exit_code, build_kernels
    from cuda_agent_cli.check.runner import locate
    from cuda_agent_cli.errors import BadInput
    from cuda_agent_cli.machine import this_machine
    from cuda_agent_cli.writeback.manifest import MANIFEST_PATH, load_manifest

    if device is not None and device not in ("cuda", "cpu"):
        raise BadInput(f"unknown device {device!r}", "use --device cuda or --device cpu")
    root, manifest, _ = locate([path] if path else [], Path.cwd())
    if manifest is None:
        raise BadInput(f"no {MANIFEST_PATH} in {root}: no integrated kernels to build",
                       "run it in a repository where `cuda-agent optimize` applied a kernel")
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
            typer.echo(f"  {'built in ' + format(r.seconds, '.1f') + ' s' if r.built else 'already built'}: {r.library}", err=True)
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

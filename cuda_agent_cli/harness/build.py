"""The build of a candidate's extension: submitted to the worker, collected into the result.

A workspace's kernels are built with ninja by the compile job (tools/compile_kernels.py), from
objects kept by content; a single-file candidate builds as it is imported (load_inline), alone
and confined, into the folder its evaluation loads from. torch/extension.h is precompiled once
per set of flags, in the background, after the first round that found none.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import cast

from cuda_agent_cli.errors import BadInput
from cuda_agent_cli.harness import jobs, wire
from cuda_agent_cli.harness.pool import Ticket, WorkerPool
from cuda_agent_cli.harness_result import Check, HarnessResult
from cuda_agent_cli.machine import environment_key
from cuda_agent_cli.workspace import Workspace

PCH_BACKGROUND_MIN_CORES = 8
# The folders (one per device) this process has asked to precompile torch/extension.h into
_PCH_STARTED: set[str] = set()

Submitted = tuple[Ticket, float]


class Builder:
    """Builds one workspace's extension for one device through the shared worker."""

    def __init__(
        self,
        workspace: Workspace,
        device: str,
        pool: WorkerPool,
        cache: Path,
        compile_timeout: float,
        confine_writes: bool,
    ) -> None:
        self.workspace, self.device, self.pool, self.cache = workspace, device, pool, cache
        self.compile_timeout, self.confine_writes = compile_timeout, confine_writes
        self.last_compile: wire.CompileResult | None = None
        # Where the last build put cuda_extension.so (None for a single-file candidate).
        self.module_dir: str | None = None
        self._pch_wanted = False

    def build(self, result: HarnessResult, run_dir: Path) -> str | None:
        """Build the extension; returns the directory holding cuda_extension.so (None: no build)."""
        return self.collect(result, self.submit(result, run_dir))

    def submit(self, result: HarnessResult, run_dir: Path) -> Submitted | None:
        if self.workspace.kind == "kernelbench":
            # load_inline builds while model_new.py is imported: that import, alone and confined
            # as the candidate's process is, builds into the folder the evaluation loads from.
            snapshot = run_dir / "inline-build" / "model_new.py"
            snapshot.parent.mkdir(parents=True, exist_ok=True)
            snapshot.write_text(self.workspace.candidate.read_text(errors="replace"))
            inline = jobs.inline_build_request(
                self.device, snapshot, self.inline_dir(), run_dir / "inline-build" / "out", self.confine_writes
            )
            Path(inline["out_dir"]).mkdir(parents=True, exist_ok=True)
            return (
                self.pool.submit("inline_build", inline, run_dir / "inline-build" / "job", self.compile_timeout),
                time.perf_counter(),
            )
        spec = jobs.compile_request(
            self.device,
            self.workspace.build_dir / self.device,
            self.workspace.binding_dir,
            self.workspace.kernels_dir,
            self.objects_dir(),
            self.pch_dir(),
        )
        return self.pool.submit("compile", spec, run_dir / "compile", self.compile_timeout), time.perf_counter()

    def objects_dir(self) -> Path:
        """Where compiled objects are kept by content: the cache, or CUDA_AGENT_OBJECTS_DIR (a
        folder several caches share, such as a test suite's between its runs). An object's name
        is the digest of its source, headers, flags, compiler and torch build, so a shared folder
        never gives a build an object made from anything else."""
        shared = os.environ.get("CUDA_AGENT_OBJECTS_DIR")
        return (Path(shared) if shared else self.cache / "objects") / self.device

    def inline_dir(self) -> Path:
        """Where a single-file candidate's load_inline builds its extensions: the workspace's own
        folder, or CUDA_AGENT_INLINE_DIR (a folder several workspaces share, such as a test suite's
        between its runs). torch names and rebuilds what is there by the extension's name and
        sources, as in its own default folder, so workspaces sharing one trust each other's
        candidates: a folder for one user's own runs, never across users. Each Python
        environment has a folder of its own there: torch's include paths are on a build's
        command line, so two environments in one folder rebuilt each other's extensions on every
        alternation (ninja sees the command change)."""
        shared = os.environ.get("CUDA_AGENT_INLINE_DIR")
        if not shared:
            return self.workspace.build_dir / f"inline-{self.device}"
        folder = Path(shared) / f"{self.device}-{environment_key()}"
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BadInput(
                f"CUDA_AGENT_INLINE_DIR={shared} cannot hold builds ({exc.strerror or exc})",
                "point it at a folder you can write, or unset it",
            ) from None
        return folder

    def pch_dir(self) -> Path:
        """Where precompiled headers are kept: the cache, or CUDA_AGENT_PCH_DIR (a folder several
        caches share, such as a test run's or a CI image's)."""
        shared = os.environ.get("CUDA_AGENT_PCH_DIR")
        return (Path(shared) if shared else self.cache / "pch") / self.device

    def build_pch_if_wanted(self) -> None:
        """Once a round is over: where its build found no precompiled header for its flags, have
        one made at low priority while the session goes on (nobody waits for it), so the builds
        after it compile each binding in about half the time. Only where cores are plenty: a
        build beside the session's later rounds would share the CPU with their timing (a small
        machine is given one: CUDA_AGENT_PCH_DIR)."""
        if not self._pch_wanted:
            return
        self._pch_wanted = False
        if (os.cpu_count() or 1) < PCH_BACKGROUND_MIN_CORES:
            return
        folder = str(self.pch_dir())
        if folder in _PCH_STARTED:
            return
        _PCH_STARTED.add(folder)
        spec = jobs.pch_request(self.device, folder)
        self.pool.submit("pch", spec, self.cache / "pch-job" / self.device, self.compile_timeout, nice=10)

    def collect(self, result: HarnessResult, submitted: Submitted | None) -> str | None:
        """The build's outcome into `result` (compiled, its check, its log); the directory
        holding cuda_extension.so, where the harness built one."""
        self.module_dir = None
        if submitted is None:
            return None
        ticket, start = submitted
        outcome = self.pool.wait(ticket)
        # The build's own time: other jobs may have been collected first while it ran.
        reported = (outcome.result or {}).get("seconds")
        result.stage_seconds["compile"] = (
            float(reported) if isinstance(reported, (int, float)) else time.perf_counter() - start
        )
        if not outcome.ok:
            detail = outcome.describe_failure()
            result.checks.append(Check("compile", False, detail))
            result.errors.append(detail)
            return None
        info = cast("wire.CompileResult", outcome.result or {})
        self.last_compile = info
        # Started once the round is over, so it never shares the machine with the first round's
        # own timing.
        self._pch_wanted = info.get("pch") == "missing"
        result.compile_log = info.get("log")
        if not info.get("ok"):
            result.checks.append(Check("compile", False, info.get("errors") or "the build failed"))
            result.errors.append("compile failed")
            return None
        result.compiled = True
        if self.workspace.kind == "kernelbench":
            result.checks.append(
                Check(
                    "compile",
                    True,
                    f"model_new.py built its extension with load_inline "
                    f"({result.stage_seconds.get('compile', 0.0):.1f} s)",
                )
            )
            return None
        rebuilt = [r for r in info.get("rebuilt", []) if not r.endswith(".so")]
        result.checks.append(
            Check(
                "compile",
                True,
                f"built cuda_extension ({len(rebuilt)} object(s) rebuilt"
                f"{': ' + ', '.join(rebuilt) if rebuilt else ''})",
            )
        )
        self.module_dir = info.get("module_dir")
        return self.module_dir

"""Locked: the inline build job, a single-file candidate's import alone.

A KernelBench candidate builds its extension with load_inline while model_new.py is imported;
this job runs that import, confined as the candidate's process is, so the extension lands in the
folder the evaluation's candidate process then only loads it from.
"""

from __future__ import annotations

import os
import time

import wire
from confinement import confine_writes
from worker_common import load_module, trim_exception

_clock = time.perf_counter


def run_inline_build_job(spec: wire.InlineBuildRequest) -> wire.CompileResult:
    """A single-file candidate's import, alone: the extension its load_inline builds lands in the
    extensions folder the evaluation's candidate process imports it from, which then only loads
    it. Confined as that process is (its writes to its own folders), since model_new.py is the
    candidate's code; nothing it does here is timed or checked. What the compile job answers:
    ok, the compiler's first errors, the seconds it took."""
    start = _clock()
    if spec.get("confine_writes"):
        confine_writes(spec)
    os.environ["TORCH_EXTENSIONS_DIR"] = spec["extensions_dir"]
    os.environ["LC_ALL"] = "C"
    try:
        load_module(spec["candidate"], "model_new")
    except BaseException as exc:
        text = f"{type(exc).__name__}: {exc}"
        if "Error building extension" in text or "error:" in text:
            from compiler_errors import trim_compiler_output

            return {
                "ok": False,
                "errors": trim_compiler_output(text, (spec["extensions_dir"],)),
                "seconds": _clock() - start,
            }
        # Not a build failure: the evaluation's import reports it where it belongs.
        return {"ok": True, "import_error": trim_exception(exc, 600), "seconds": _clock() - start}
    return {"ok": True, "seconds": _clock() - start}

"""Locked: where a process that runs the candidate's code may write (docs/security.md, threat 2).

Both such processes call it before any of that code runs: the candidate's (candidate.py) and a
single-file candidate's build (inline_build.py). What is left writable: their own output
folders, a private temporary folder, the extensions folder and the compiler caches (landlock.py
does the confining).
"""

from __future__ import annotations

import os
from pathlib import Path

import landlock
import wire


def confine_writes(spec: wire.EvaluateRequest | wire.InlineBuildRequest) -> str:
    """From here on this process (and whatever it starts) writes only its own output folders."""
    import tempfile

    private_tmp = Path(spec["out_dir"]).parent / "candidate-tmp"
    private_tmp.mkdir(mode=0o700, exist_ok=True)
    os.environ["TMPDIR"] = str(private_tmp)  # compilers that load_inline runs
    tempfile.tempdir = str(private_tmp)
    writable = [spec["out_dir"], str(private_tmp), *spec.get("writable", [])]
    caches = [spec.get("extensions_dir")] + [os.environ.get(v) for v in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")]
    for folder in filter(None, caches):
        os.makedirs(folder, exist_ok=True)
        writable.append(folder)
    nv_cache = os.path.join(os.path.expanduser("~"), ".nv")  # the CUDA driver's JIT cache
    if os.path.isdir(nv_cache):
        writable.append(nv_cache)
    return landlock.restrict_writes(writable)

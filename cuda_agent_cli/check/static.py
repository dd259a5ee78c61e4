"""The static half of `check`: hashes, staleness and architecture, from files and versions only.

Nothing here imports torch, compiles or touches a GPU, so `check --fast` over twenty kernels
takes well under the five seconds a pre-commit hook may spend.
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path
from typing import Any

from cuda_agent_cli.check.status import Finding, Status
from cuda_agent_cli.machine import Machine, cuda_major, torch_release
from cuda_agent_cli.writeback.fingerprint import (
    class_fingerprint,
    folder_hashes,
    integration_present,
    unpatched_candidates,
)

# Files of a kernel folder that the build or the loader reads: one added by hand changes the kernel.
_SOURCE_SUFFIXES = {".cu", ".cuh", ".cpp", ".cc", ".h", ".hpp", ".py", ".json"}


def class_line(module_source: str, class_name: str) -> int | None:
    try:
        tree = ast.parse(module_source)
    except SyntaxError:
        return None
    node = next((n for n in reversed(tree.body) if isinstance(n, ast.ClassDef) and n.name == class_name), None)
    if node is None:
        return None
    return min([node.lineno, *(d.lineno for d in node.decorator_list)])


def reference_findings(root: Path, entry: dict[str, Any]) -> list[Finding]:
    """STALE and BROKEN findings about the module and the class the kernel replaces."""
    cls = str(entry.get("class") or str(entry.get("target", "")).rpartition("::")[2] or "")
    module_rel = entry.get("module_file")
    if not module_rel:
        return [Finding(Status.BROKEN, "the record does not say which file holds the class", code="no-module-file")]
    module = root / module_rel
    if not module.is_file():
        return [Finding(Status.BROKEN, f"{module_rel} is missing", module_rel, code="module-missing")]
    source = module.read_text(errors="replace")
    line = class_line(source, cls)
    out: list[Finding] = []
    if not integration_present(source, cls):
        out.append(
            Finding(
                Status.BROKEN,
                f"{module_rel} no longer hands {cls} to its kernel loader "
                "(the lines applying the kernel added are gone)",
                module_rel,
                line,
                "not-integrated",
            )
        )
    fp = class_fingerprint(source, cls)
    if fp is None:
        out.append(Finding(Status.STALE, f"{module_rel} no longer defines class {cls}", module_rel, code="class-gone"))
        return out
    if entry.get("reference_sha256"):
        if fp.sha256 != entry["reference_sha256"]:
            out.append(
                Finding(
                    Status.STALE,
                    f"the source of {cls} changed since the kernel was verified",
                    module_rel,
                    line,
                    "reference-changed",
                )
            )
        if entry.get("signature") and fp.signature != entry["signature"]:
            out.append(
                Finding(
                    Status.STALE,
                    f"the call signature of {cls} changed: was `{entry['signature']}`, now `{fp.signature}`",
                    module_rel,
                    line,
                    "signature-changed",
                )
            )
        if entry.get("inputs_source") == "get_inputs" and entry.get("inputs_sha256") != fp.inputs_sha256:
            out.append(
                Finding(
                    Status.STALE,
                    f"get_inputs()/get_init_inputs() of {module_rel} changed: the shapes "
                    "and dtypes it was verified on may differ",
                    module_rel,
                    None,
                    "inputs-changed",
                )
            )
    elif entry.get("module_sha256"):
        # A version-1 record: the whole module file was hashed before it was patched.
        digests = {hashlib.sha256(t.encode()).hexdigest() for t in unpatched_candidates(source, cls)}
        if entry["module_sha256"] not in digests:
            out.append(
                Finding(
                    Status.STALE,
                    f"{module_rel} changed since the kernel was verified",
                    module_rel,
                    line,
                    "reference-changed",
                )
            )
    else:
        out.append(
            Finding(
                Status.NOT_MEASURED,
                "the record has no fingerprint of the reference: `cuda-agent check --update` records one",
                module_rel,
                line,
                "no-fingerprint",
            )
        )
    return out


def source_findings(root: Path, entry: dict[str, Any]) -> list[Finding]:
    """BROKEN findings about the kernel folder: files missing, edited or added since it was verified."""
    folder_rel = entry.get("folder")
    if not folder_rel:
        return [Finding(Status.BROKEN, "the record does not say where the kernel's folder is", code="no-folder")]
    folder = root / folder_rel
    if not folder.is_dir():
        return [
            Finding(Status.BROKEN, f"the kernel folder {folder_rel}/ is missing", folder_rel, code="folder-missing")
        ]
    recorded = entry.get("files")
    if not isinstance(recorded, dict) or not recorded:
        missing = [n for n in ("loader.py", "model_new.py", "verified.json") if not (folder / n).is_file()]
        if missing:
            return [
                Finding(
                    Status.BROKEN,
                    f"{folder_rel}/{missing[0]} is missing",
                    f"{folder_rel}/{missing[0]}",
                    code="source-missing",
                )
            ]
        return [
            Finding(
                Status.NOT_MEASURED,
                "the record has no hashes of the kernel's sources (written by an older "
                "cuda-agent): `cuda-agent check --update` records them",
                folder_rel,
                code="no-hashes",
            )
        ]
    now = folder_hashes(folder)
    out: list[Finding] = []
    for rel, digest in sorted(recorded.items()):
        path = f"{folder_rel}/{rel}"
        if rel not in now:
            out.append(Finding(Status.BROKEN, f"{path} is missing", path, code="source-missing"))
        elif now[rel] != digest:
            out.append(
                Finding(Status.BROKEN, f"{path} was edited since the kernel was verified", path, 1, "source-edited")
            )
    for rel in sorted(set(now) - set(recorded)):
        if Path(rel).suffix in _SOURCE_SUFFIXES:
            out.append(
                Finding(
                    Status.BROKEN,
                    f"{folder_rel}/{rel} was added after the kernel was verified",
                    f"{folder_rel}/{rel}",
                    1,
                    "source-added",
                )
            )
    return out


def environment_findings(entry: dict[str, Any], machine: Machine) -> list[Finding]:
    """NEW-ARCH where the record's architecture or versions differ from this machine's;
    NOT-MEASURED where this machine cannot tell (a CUDA kernel without a GPU)."""
    device = entry.get("device") or "cuda"
    out: list[Finding] = []
    rec_torch, here_torch = torch_release(entry.get("torch")), torch_release(machine.torch)
    if machine.torch is None:
        out.append(Finding(Status.NOT_MEASURED, "torch is not installed here", code="no-torch"))
    elif rec_torch and rec_torch != here_torch:
        out.append(
            Finding(
                Status.NEW_ARCH,
                f"verified with torch {entry.get('torch')}, this machine has {machine.torch}",
                code="torch-version",
            )
        )
    if device == "cuda":
        if machine.torch is not None and machine.cuda is None:
            out.append(
                Finding(
                    Status.NOT_MEASURED,
                    f"torch {machine.torch} here has no CUDA support, so this CUDA "
                    "kernel cannot be checked on this machine",
                    code="no-cuda",
                )
            )
            return out
        rec_cuda = cuda_major(entry.get("cuda"))
        if rec_cuda and machine.cuda and rec_cuda != cuda_major(machine.cuda):
            out.append(
                Finding(
                    Status.NEW_ARCH,
                    f"verified with CUDA {entry.get('cuda')}, this machine's torch uses CUDA {machine.cuda}",
                    code="cuda-version",
                )
            )
        gpu = machine.gpu_for(entry.get("gpu") or None)
        if gpu is None and not machine.gpus_known:
            out.append(
                Finding(
                    Status.NOT_MEASURED,
                    "nvidia-smi cannot tell which GPU this machine has, so its "
                    "architecture was not compared (the full check asks torch)",
                    code="gpu-unknown",
                )
            )
            return out
        if gpu is None:
            out.append(
                Finding(
                    Status.NOT_MEASURED,
                    "no CUDA GPU here, so this CUDA kernel cannot be checked on this machine",
                    code="no-gpu",
                )
            )
            return out
        recorded = entry.get("arch")
        if recorded and recorded != gpu.arch:
            was = f"{recorded} ({entry['gpu']})" if entry.get("gpu") else recorded
            out.append(
                Finding(
                    Status.NEW_ARCH, f"verified on {was}, this machine has {gpu.arch} ({gpu.name})", code="gpu-arch"
                )
            )
        elif not recorded and entry.get("gpu") and entry["gpu"] != gpu.name:
            out.append(
                Finding(Status.NEW_ARCH, f"verified on {entry['gpu']}, this machine has {gpu.name}", code="gpu-arch")
            )
    else:
        recorded = entry.get("arch")
        if recorded and recorded != machine.cpu_arch:
            out.append(
                Finding(
                    Status.NEW_ARCH,
                    f"verified on a {recorded} CPU, this machine is {machine.cpu_arch}",
                    code="cpu-arch",
                )
            )
    return out


def static_findings(root: Path, entry: dict[str, Any], machine: Machine) -> list[Finding]:
    return [*source_findings(root, entry), *reference_findings(root, entry), *environment_findings(entry, machine)]

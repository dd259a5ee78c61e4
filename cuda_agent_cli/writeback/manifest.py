""".cuda-agent/kernels.toml: one `[[kernel]]` table per integrated class, and a format version.

Version 2 (written now) records per kernel what `check` and `build` need:

    version = 2

    [[kernel]]
    target = "pkg/blocks.py::Block"       # as optimize was given it, relative to the repository
    class = "Block"
    module = "pkg.blocks"
    module_file = "pkg/blocks.py"
    folder = "pkg/_cuda_agent/block"      # loader, kernels, verified.json
    reference_sha256 = "..."               # the class's syntax tree (writeback.fingerprint)
    signature = "forward(self, x) ; __init__(self, dim)"
    inputs_source = "spec"                 # or "get_inputs": then inputs_sha256 covers them
    inputs = "float32[8,256,384]; init: 384"
    input_spec = "{...}"                   # the verified call, inputs_spec JSON
    device = "cuda"                        # and arch ("sm_90" / "x86_64"), gpu, cpu, torch, cuda
    speedup_vs_eager = 1.8                 # with speedup_vs_eager_interval = [lo, hi] when measured
    method = "..."
    policy = "strict"

    [kernel.files]                         # sha256 of every file in `folder`
    "kernels/block.cu" = "..."

Version 1 (no `version` key) had `reference_sha256` as the hash of the whole module file before
it was patched, and no folder, file hashes or architecture. It is migrated on reading: the
module hash moves to `module_sha256`, the folder and module file are derived from the target,
and what it lacks stays absent (`check` says so and `check --update` records it).

The file is ours, so it is rewritten whole; entries for other targets, and keys this version
does not know, are kept as they were read.
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from cuda_agent_cli.errors import BadInput, WriteBackRefused

MANIFEST_PATH = ".cuda-agent/kernels.toml"
MANIFEST_VERSION = 2
HEADER = (
    "# Kernels integrated by cuda-agent: what each was verified on and how fast it measured.\n"
    "# Written by `cuda-agent optimize` and `cuda-agent check --update`; read by `cuda-agent check`\n"
    "# and `cuda-agent build`. Remove an entry together with its _cuda_agent/ folder and the lines\n"
    "# it added to the module to undo it.\n"
)
KERNEL_DIR = "_cuda_agent"


def _key(k: str) -> str:
    return k if k and k.replace("_", "").replace("-", "").isalnum() else json.dumps(k)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return json.dumps(str(v))
        return repr(round(v, 6))
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # a JSON string is a valid TOML basic string
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def render_manifest(entries: list[dict[str, Any]]) -> str:
    """The whole file for `entries` (tables of scalars, lists, and tables of scalars)."""
    out = [HEADER, f"\nversion = {MANIFEST_VERSION}\n"]
    for e in entries:
        out.append("\n[[kernel]]\n")
        tables = {k: v for k, v in e.items() if isinstance(v, dict)}
        for k, v in e.items():
            if v is None or k in tables:
                continue
            out.append(f"{_key(k)} = {_value(v)}\n")
        for name, table in tables.items():
            out.append(f"\n[kernel.{_key(name)}]\n")
            for k, v in table.items():
                if v is not None:
                    out.append(f"{_key(k)} = {_value(v)}\n")
    return "".join(out)


def _folder_for(target: str) -> tuple[str | None, str | None]:
    """(module_file, folder) for a `path.py::Class` target, the layout apply has always used."""
    path, sep, cls = target.rpartition("::")
    if not sep or not path.endswith(".py"):
        return None, None
    from cuda_agent_cli.task.target import snake_case

    module = PurePosixPath(path)
    return module.as_posix(), (module.parent / KERNEL_DIR / snake_case(cls)).as_posix()


def migrate_entry(entry: dict[str, Any], version: int) -> dict[str, Any]:
    """One `[[kernel]]` table of format `version` as a version-2 table."""
    if version >= MANIFEST_VERSION:
        return dict(entry)
    out = dict(entry)
    # v1's reference_sha256 hashed the whole module file before the patch, not the class.
    if "reference_sha256" in out:
        out["module_sha256"] = out.pop("reference_sha256")
    module_file, folder = _folder_for(str(out.get("target", "")))
    out.setdefault("module_file", module_file)
    out.setdefault("folder", folder)
    if "input_spec" in out and "inputs_source" not in out:
        try:
            source = json.loads(out["input_spec"]).get("source")
        except (ValueError, AttributeError):
            source = None
        out["inputs_source"] = "get_inputs" if source == "get_inputs" else "spec"
    out["migrated_from"] = version
    return {k: v for k, v in out.items() if v is not None}


@dataclass(frozen=True)
class Manifest:
    version: int  # the version the file was written in
    kernels: list[dict[str, Any]]  # migrated to the current version


def load_manifest(text: str, *, hint: str = "fix or remove it") -> Manifest:
    """Parse and migrate; BadInput (exit 2) for a file that is not a manifest this version reads."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{MANIFEST_PATH} is not valid TOML ({exc})", hint) from None
    version = data.get("version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BadInput(f"{MANIFEST_PATH}: `version` must be a positive integer, got {version!r}", hint)
    if version > MANIFEST_VERSION:
        raise BadInput(
            f"{MANIFEST_PATH} is format version {version}, newer than this cuda-agent reads ({MANIFEST_VERSION})",
            "upgrade cuda-agent",
        )
    kernels = data.get("kernel", [])
    if not isinstance(kernels, list) or not all(isinstance(k, dict) for k in kernels):
        raise BadInput(f"{MANIFEST_PATH}: `kernel` must be an array of tables ([[kernel]])", hint)
    for i, k in enumerate(kernels):
        if not isinstance(k.get("target"), str) or not k["target"]:
            raise BadInput(f"{MANIFEST_PATH}: kernel entry {i + 1} has no `target`", hint)
    return Manifest(version, [migrate_entry(dict(k), version) for k in kernels])


def parse_manifest(text: str) -> list[dict[str, Any]]:
    """The kernel entries (migrated to the current version), for write-back."""
    try:
        return load_manifest(text, hint="fix or remove it, then apply again").kernels
    except BadInput as exc:
        raise WriteBackRefused(exc.message, exc.hint) from None


def updated_manifest(existing: str | None, entry: dict[str, Any]) -> str:
    """The manifest text with `entry` added, replacing any entry for the same target."""
    entries = parse_manifest(existing) if existing else []
    entries = [e for e in entries if e.get("target") != entry["target"]]
    entries.append(entry)
    return render_manifest(entries)


def replaced_entries(existing: str, updates: dict[str, dict[str, Any]]) -> str:
    """The manifest text with the entries whose target is a key of `updates` replaced in place."""
    entries = load_manifest(existing).kernels
    return render_manifest([updates.get(e["target"], e) for e in entries])

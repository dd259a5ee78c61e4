""".cuda-agent/kernels.toml: one `[[kernel]]` table per integrated class.

The file is ours, so it is rewritten whole; entries for other targets, and keys this version
does not know, are kept as they were read.
"""

from __future__ import annotations

import json
import math
import tomllib
from typing import Any

from cuda_agent_cli.errors import WriteBackRefused

MANIFEST_PATH = ".cuda-agent/kernels.toml"
HEADER = (
    "# Kernels integrated by cuda-agent: what each was verified on and how fast it measured.\n"
    "# Written by `cuda-agent optimize`; remove an entry together with its _cuda_agent/ folder and\n"
    "# the lines it added to the module to undo it.\n"
)


def _key(k: str) -> str:
    return k if k.replace("_", "").replace("-", "").isalnum() else json.dumps(k)


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
    """The whole file for `entries` (flat tables of scalars, lists and small inline tables)."""
    out = [HEADER]
    for e in entries:
        out.append("\n[[kernel]]\n")
        for k, v in e.items():
            if v is None:
                continue
            out.append(f"{_key(k)} = {_value(v)}\n")
    return "".join(out)


def parse_manifest(text: str) -> list[dict[str, Any]]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise WriteBackRefused(f"{MANIFEST_PATH} is not valid TOML ({exc})",
                               "fix or remove it, then apply again") from None
    kernels = data.get("kernel", [])
    if not isinstance(kernels, list):
        raise WriteBackRefused(f"{MANIFEST_PATH}: `kernel` must be an array of tables", "fix or remove it")
    return [dict(k) for k in kernels if isinstance(k, dict)]


def updated_manifest(existing: str | None, entry: dict[str, Any]) -> str:
    """The manifest text with `entry` added, replacing any entry for the same target."""
    entries = parse_manifest(existing) if existing else []
    entries = [e for e in entries if e.get("target") != entry["target"]]
    entries.append(entry)
    return render_manifest(entries)

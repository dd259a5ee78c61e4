"""Locked: trim compiler output to what a model needs (first errors with file:line)."""

from __future__ import annotations

import re

# gcc/clang "file:line:col: error:", nvcc "file(line): error:", the linker's complaints.
_ERROR = re.compile(
    r"(?::\d+(?::\d+)?:\s*(?:fatal\s+)?error\b)"
    r"|(?:\(\d+\):\s*(?:catastrophic\s+)?error\b)"
    r"|(?:undefined reference to)"
    r"|(?:undefined symbol)"
    r"|(?:^\s*(?:fatal\s+)?error\b)",
    re.IGNORECASE,
)
_DIAGNOSTIC = re.compile(
    r"(?::\d+(?::\d+)?:\s*(?:warning|note|error)\b)|(?:\(\d+\):\s*(?:warning|error|remark)\b)|^FAILED:|^ninja:|^\[\d+/\d+\]"
)
_NOISE = re.compile(r"^(collect2: error: ld returned|ninja: build stopped|ninja: error: ...)")


def _is_context(line: str) -> bool:
    # gcc echoes the source line and a caret line, both indented or with a gutter bar.
    return bool(line.strip()) and (line.startswith(" ") or line.startswith("\t") or "|" in line[:12])


def trim_compiler_output(
    text: str,
    strip_prefixes: tuple[str, ...] = (),
    max_errors: int = 5,
    max_chars: int = 3000,
    log_path: str | None = None,
) -> str:
    """The first `max_errors` errors, each with its source and caret lines, paths made relative.

    When no line looks like an error (a crash of the compiler, a missing tool) the last lines of
    the output are kept instead, so the reason is never lost.
    """
    for prefix in strip_prefixes:
        if prefix:
            text = text.replace(prefix.rstrip("/") + "/", "")
    lines = text.splitlines()
    picked: list[str] = []
    errors = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        if _ERROR.search(line) and not _NOISE.match(line):
            errors += 1
            if errors <= max_errors:
                picked.append(line.rstrip())
                j = i + 1
                while j < len(lines) and j <= i + 3 and _is_context(lines[j]) and not _DIAGNOSTIC.search(lines[j]):
                    picked.append(lines[j].rstrip())
                    j += 1
        i += 1
    if not picked:
        tail = [ln.rstrip() for ln in lines if ln.strip()][-12:]
        picked = tail
    out = "\n".join(picked)
    if len(out) > max_chars:
        out = out[:max_chars].rstrip() + "\n…"
    if errors > max_errors:
        out += f"\n… and {errors - max_errors} more error(s)"
    if log_path:
        out += f"\n(full log: {log_path})"
    return out

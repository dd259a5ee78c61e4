"""Read, Write, Edit and MultiEdit: the file tools, with the write rules of paths.py."""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

from cuda_agent_cli.actions.paths import check_read, check_write, display, read_bytes_nofollow, write_file
from cuda_agent_cli.actions.toolbox import ActionContext, ToolResult, error

MAX_LINES = 2000
MAX_LINE_CHARS = 2000
MAX_READ_BYTES = 50 << 20


def numbered(lines: list[str], first: int) -> str:
    """cat -n: right-aligned line number, a tab, the line (long lines shortened)."""
    out = []
    for i, line in enumerate(lines, start=first):
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS] + f"... [{len(line) - MAX_LINE_CHARS} more characters]"
        out.append(f"{i:>6}\t{line}")
    return "\n".join(out)


def _missing(path: str, target: Path, ctx: ActionContext) -> ToolResult:
    hint = ""
    parent = target.parent
    if parent.is_dir():
        try:
            names = os.listdir(parent)
        except OSError:
            names = []
        close = difflib.get_close_matches(target.name, names, n=3, cutoff=0.5)
        if close:
            hint = " Did you mean: " + ", ".join(display(parent / c, ctx.root) for c in close) + "?"
    return error(f"{path}: file does not exist.{hint}")


def read_text(target: Path) -> str:
    """UTF-8 text with its line endings kept; refuses directories and binary files."""
    if target.is_dir():
        raise IsADirectoryError(f"{target} is a directory; use Glob or Bash ls to list it")
    # Only regular files (devices never end, pipes block), never through a swapped-in link.
    raw = read_bytes_nofollow(target, MAX_READ_BYTES)
    if b"\x00" in raw[:8192]:
        raise ValueError(f"{target} is a binary file")
    return raw.decode("utf-8")


def _text_or_error(path: str, target: Path, ctx: ActionContext) -> str | ToolResult:
    if not target.exists():
        return _missing(path, target, ctx)
    try:
        return read_text(target)
    except (IsADirectoryError, ValueError) as exc:
        return error(str(exc) if not isinstance(exc, UnicodeDecodeError) else f"{path} is not UTF-8 text")


class Read:
    name = "Read"
    writes = False
    runs_commands = False
    description = (
        "Reads a text file and returns it in cat -n format: each line prefixed by its line "
        "number and a tab (the number and tab are not part of the file).\n\n"
        "- file_path: absolute, or relative to the workspace root.\n"
        "- By default up to 2000 lines from the start; for longer files pass offset (the line "
        "number to start at, 1-based) and limit (how many lines).\n"
        "- Lines longer than 2000 characters are shortened.\n"
        "- Read a file before editing it, so old_string matches exactly; when you Edit, never "
        "copy the line-number prefix into old_string or new_string.\n"
        "- Directories cannot be read: use Glob or Bash ls."
    )
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "The path of the file to read"},
            "offset": {
                "type": "integer",
                "minimum": 1,
                "description": "The line number to start reading from (1-based)",
            },
            "limit": {"type": "integer", "minimum": 1, "description": "The number of lines to read"},
        },
        "required": ["file_path"],
        "additionalProperties": False,
    }

    def run(self, args: dict[str, Any], ctx: ActionContext) -> ToolResult:
        path = args["file_path"]
        target = check_read(path, ctx.policy)
        text = _text_or_error(path, target, ctx)
        if isinstance(text, ToolResult):
            return text
        lines = text.splitlines()
        if not lines:
            return ToolResult(f"({display(target, ctx.root)} is empty)", data={"lines": 0})
        offset = int(args.get("offset", 1))
        limit = int(args.get("limit", MAX_LINES))
        if offset > len(lines):
            return error(f"{path} has {len(lines)} lines; offset {offset} is past the end")
        chunk = lines[offset - 1 : offset - 1 + limit]
        body = numbered(chunk, offset)
        last = offset + len(chunk) - 1
        if offset > 1 or last < len(lines):
            body += (
                f"\n\n[lines {offset}-{last} of {len(lines)}; use offset={last + 1} to continue]"
                if last < len(lines)
                else f"\n\n[lines {offset}-{last} of {len(lines)}]"
            )
        return ToolResult(body, data={"path": str(target), "lines": len(lines)})


class Write:
    name = "Write"
    writes = True
    runs_commands = False
    description = (
        "Writes a file, replacing it if it exists; parent directories are created.\n\n"
        "- file_path: absolute, or relative to the workspace root. Only the writable areas "
        "may be written (for kernel work: kernels/, model_new.py and scratch/); locked files "
        "are refused.\n"
        "- Prefer Edit or MultiEdit to change part of an existing file; Read it first."
    )
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "The path of the file to write"},
            "content": {"type": "string", "description": "The full content to write to the file"},
        },
        "required": ["file_path", "content"],
        "additionalProperties": False,
    }

    def run(self, args: dict[str, Any], ctx: ActionContext) -> ToolResult:
        target = check_write(args["file_path"], ctx.policy)
        if target.is_dir():
            return error(f"{args['file_path']} is a directory")
        existed = target.exists()
        content = args["content"]
        write_file(target, content.encode("utf-8"), ctx.policy)
        n = len(content.splitlines())
        verb = "Updated" if existed else "Created"
        return ToolResult(
            f"{verb} {display(target, ctx.root)} ({n} lines)", data={"path": str(target), "created": not existed}
        )


# --- Edit -------------------------------------------------------------------------------------


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _occurrences(text: str, needle: str) -> list[int]:
    found: list[int] = []
    start = 0
    while True:
        i = text.find(needle, start)
        if i < 0:
            return found
        found.append(i)
        start = i + max(1, len(needle))


def closest_region(text: str, needle: str) -> tuple[int, int, float] | None:
    """(first line, last line, similarity) of the window of text most like `needle`."""
    lines = text.splitlines()
    want = needle.strip("\n").splitlines() or [needle]
    width = max(1, len(want))
    target = "\n".join(want)
    best: tuple[int, int, float] | None = None
    for i in range(max(1, len(lines) - width + 1)):
        cand = "\n".join(lines[i : i + width])
        m = difflib.SequenceMatcher(None, cand, target, autojunk=False)
        if best is not None and m.real_quick_ratio() <= best[2]:
            continue
        if best is not None and m.quick_ratio() <= best[2]:
            continue
        r = m.ratio()
        if best is None or r > best[2]:
            best = (i + 1, min(len(lines), i + width), r)
    return best


def _squash(s: str) -> str:
    return " ".join(s.split())


def explain_miss(text: str, needle: str, path: str) -> str:
    msg = f"old_string was not found in {path}."
    if _squash(needle) and _squash(needle) in _squash(text):
        msg += " It matches only if whitespace is ignored: copy the exact indentation and line breaks from Read."
    region = closest_region(text, needle) if text else None
    if region and region[2] >= 0.4:
        a, b, r = region
        lines = text.splitlines()
        msg += f" The closest text is at lines {a}-{b} ({r:.0%} similar):\n" + numbered(lines[a - 1 : b], a)
    else:
        msg += " Nothing in the file is close; Read the file and copy the text to replace exactly."
    return msg


def apply_edit(text: str, old: str, new: str, replace_all: bool, path: str) -> tuple[str, int, int]:
    """(new text, replacements, first changed line); ValueError with a model-facing reason."""
    if old == new:
        raise ValueError("old_string and new_string are identical: nothing to change")
    if old == "":
        if text.strip():
            raise ValueError(f"old_string is empty, but {path} is not: give the text to replace")
        return new, 1, 1
    hits = _occurrences(text, old)
    if not hits:
        raise ValueError(explain_miss(text, old, path))
    if len(hits) > 1 and not replace_all:
        where = ", ".join(str(_line_of(text, i)) for i in hits[:20])
        raise ValueError(
            f"old_string occurs {len(hits)} times in {path} (at lines {where}); "
            "include more surrounding lines to make it unique, or set replace_all to true"
        )
    first = _line_of(text, hits[0])
    if replace_all:
        return text.replace(old, new), len(hits), first
    i = hits[0]
    return text[:i] + new + text[i + len(old) :], 1, first


def _snippet(text: str, first: int, new: str) -> str:
    lines = text.splitlines()
    span = max(1, len(new.splitlines()))
    a = max(1, first - 3)
    b = min(len(lines), first + span + 2)
    return numbered(lines[a - 1 : b], a)


def _edit_target(path: str, ctx: ActionContext) -> tuple[Path, str | None]:
    target = check_write(path, ctx.policy)
    if not target.exists():
        return target, None
    return target, read_text(target)


_EDIT_FIELDS = {
    "old_string": {"type": "string", "description": "The exact text to replace"},
    "new_string": {"type": "string", "description": "The text to replace it with (must differ from old_string)"},
    "replace_all": {"type": "boolean", "description": "Replace every occurrence of old_string (default false)"},
}


class Edit:
    name = "Edit"
    writes = True
    runs_commands = False
    description = (
        "Replaces exact text in a file.\n\n"
        "- old_string must match the file exactly, including indentation, and must occur "
        "exactly once; otherwise the edit fails and says where the match is ambiguous or which "
        "lines come closest. Add surrounding lines to make it unique, or set replace_all to "
        "change every occurrence (useful to rename a variable).\n"
        "- Read the file first; never include the line-number prefix Read shows.\n"
        "- An empty old_string on a file that does not exist creates it with new_string.\n"
        "- Only the writable areas may be edited (for kernel work: kernels/, model_new.py, scratch/)."
    )
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "The path of the file to modify"},
            **_EDIT_FIELDS,
        },
        "required": ["file_path", "old_string", "new_string"],
        "additionalProperties": False,
    }

    def run(self, args: dict[str, Any], ctx: ActionContext) -> ToolResult:
        path = args["file_path"]
        target, text = _edit_target(path, ctx)
        if text is None and args["old_string"] != "":
            return _missing(path, target, ctx)
        try:
            new_text, n, first = apply_edit(
                text or "", args["old_string"], args["new_string"], bool(args.get("replace_all")), path
            )
        except ValueError as exc:
            return error(str(exc))
        write_file(target, new_text.encode("utf-8"), ctx.policy)
        what = f"{n} occurrences" if n > 1 else "1 occurrence"
        return ToolResult(
            f"Edited {display(target, ctx.root)} ({what} replaced):\n" + _snippet(new_text, first, args["new_string"]),
            data={"path": str(target), "replacements": n},
        )


class MultiEdit:
    name = "MultiEdit"
    writes = True
    runs_commands = False
    description = (
        "Makes several find-and-replace edits to one file in a single atomic step: the edits "
        "apply in order, each to the result of the previous one, and if any of them fails "
        "nothing is written.\n\n"
        "- Each edit follows Edit's rules: old_string must match exactly and be unique unless "
        "replace_all is true.\n"
        "- To create a file, make the first edit's old_string empty.\n"
        "- Prefer it over several Edit calls on the same file."
    )
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "The path of the file to modify"},
            "edits": {
                "type": "array",
                "minItems": 1,
                "description": "Edits to apply in order",
                "items": {
                    "type": "object",
                    "properties": _EDIT_FIELDS,
                    "required": ["old_string", "new_string"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["file_path", "edits"],
        "additionalProperties": False,
    }

    def run(self, args: dict[str, Any], ctx: ActionContext) -> ToolResult:
        path = args["file_path"]
        target, text = _edit_target(path, ctx)
        edits = args["edits"]
        if text is None and edits[0]["old_string"] != "":
            return _missing(path, target, ctx)
        text = text or ""
        total = 0
        first_line = None
        for k, e in enumerate(edits, start=1):
            try:
                text, n, first = apply_edit(text, e["old_string"], e["new_string"], bool(e.get("replace_all")), path)
            except ValueError as exc:
                return error(f"edit {k} of {len(edits)} failed, so no edit was applied: {exc}")
            total += n
            first_line = first if first_line is None else min(first_line, first)
        write_file(target, text.encode("utf-8"), ctx.policy)
        return ToolResult(
            f"Applied {len(edits)} edits ({total} replacements) to {display(target, ctx.root)}",
            data={"path": str(target), "edits": len(edits), "replacements": total},
        )

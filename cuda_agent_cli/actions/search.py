"""Glob and Grep. Grep uses ripgrep when it is installed and a pure-Python search with the
same options and the same output format when it is not."""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_agent_cli.actions.paths import PathRefused, check_read, display, read_bytes_nofollow
from cuda_agent_cli.actions.toolbox import ActionContext, ToolResult, error
from cuda_agent_cli.sandbox import default_hidden

GLOB_LIMIT = 100
# File types for `type`; rg knows these too (cuda is added to it, older rg lacks it).
FILE_TYPES: dict[str, tuple[str, ...]] = {
    "py": ("*.py", "*.pyi"),
    "cuda": ("*.cu", "*.cuh"),
    "cpp": ("*.cpp", "*.cc", "*.cxx", "*.hpp", "*.hh", "*.hxx", "*.h", "*.inl"),
    "c": ("*.c", "*.h"),
    "md": ("*.md", "*.markdown"),
    "json": ("*.json",),
    "toml": ("*.toml",),
    "yaml": ("*.yaml", "*.yml"),
    "sh": ("*.sh", "*.bash"),
    "txt": ("*.txt",),
    "js": ("*.js", "*.jsx"),
    "ts": ("*.ts", "*.tsx"),
    "rust": ("*.rs",),
    "go": ("*.go",),
    "cmake": ("*.cmake", "CMakeLists.txt"),
    "ipynb": ("*.ipynb",),
}
SKIP_DIRS = {".git"}


def search_root(path: str | None, ctx: ActionContext) -> Path:
    """A directory or file the agent may search; never one that contains hidden places."""
    target = check_read(path or ".", ctx.policy)
    if not target.exists():
        raise PathRefused(f"{path}: no such file or directory")
    if target.is_dir() and not _inside_allowed(target, ctx):
        # Paths inside hidden places were refused by check_read; here: paths above them.
        for h in (*default_hidden(), Path("/proc"), Path("/tmp")):
            if target in h.parents:
                raise PathRefused(
                    f"{path}: too broad, it contains hidden locations; search the "
                    "workspace or a specific directory such as /usr/include"
                )
    return target


def _inside_allowed(target: Path, ctx: ActionContext) -> bool:
    return target == ctx.root or ctx.root in target.parents


class Glob:
    name = "Glob"
    writes = False
    runs_commands = False
    description = (
        "Finds files by name pattern, newest first.\n\n"
        '- pattern: a glob such as "**/*.cu" or "kernels/*.cpp" (** matches any number of '
        "directories).\n"
        "- path: the directory to search (default: the workspace root).\n"
        f"- Returns at most {GLOB_LIMIT} paths, most recently modified first. Use Grep to "
        "search inside files."
    )
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "The glob pattern to match files against"},
            "path": {"type": "string", "description": "The directory to search in (default: the workspace root)"},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }

    def run(self, args: dict[str, Any], ctx: ActionContext) -> ToolResult:
        pattern = args["pattern"]
        if not pattern or pattern.startswith("/"):
            return error('Glob: pattern must be relative (put the directory in `path`), e.g. "**/*.cu"')
        base = search_root(args.get("path"), ctx)
        if not base.is_dir():
            return error(f"Glob: {args.get('path')} is not a directory")
        found: list[tuple[float, Path]] = []
        for p in base.glob(pattern):
            if any(part in SKIP_DIRS for part in p.relative_to(base).parts):
                continue
            try:
                st = p.stat()
                if p.is_file():
                    check_read(str(p), ctx.policy)  # a link out of the workspace is not listed
                    found.append((st.st_mtime, p))
            except (OSError, PathRefused):
                continue
        if not found:
            return ToolResult("No files found", data={"count": 0})
        found.sort(key=lambda t: (-t[0], str(t[1])))
        shown = [display(p, ctx.root) for _, p in found[:GLOB_LIMIT]]
        text = "\n".join(shown)
        if len(found) > GLOB_LIMIT:
            text += f"\n[{len(found) - GLOB_LIMIT} more files not shown; use a narrower pattern or path]"
        return ToolResult(text, data={"count": len(found)})


# --- Grep -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GrepQuery:
    pattern: str
    output_mode: str = "files_with_matches"
    ignore_case: bool = False
    line_numbers: bool = True
    after: int = 0
    before: int = 0
    glob: str | None = None
    type: str | None = None
    multiline: bool = False
    head_limit: int | None = None


def rg_argv(rg: str, q: GrepQuery, target: str) -> list[str]:
    argv = [
        rg,
        "--no-config",
        "--color",
        "never",
        "--no-heading",
        "--with-filename",
        "--hidden",
        "--no-ignore",
        "--sort",
        "path",
        "--glob",
        "!.git",
        "--type-add",
        "cuda:*.{cu,cuh}",
        "--type-add",
        "ipynb:*.ipynb",
    ]
    if q.ignore_case:
        argv.append("-i")
    if q.multiline:
        argv += ["-U", "--multiline-dotall"]
    if q.glob:
        argv += ["--glob", q.glob]
    if q.type:
        argv += ["--type", q.type]
    if q.output_mode == "files_with_matches":
        argv.append("--files-with-matches")
    elif q.output_mode == "count":
        argv.append("--count")
    else:
        argv.append("-n" if q.line_numbers else "--no-line-number")
        if q.after:
            argv += ["-A", str(q.after)]
        if q.before:
            argv += ["-B", str(q.before)]
    return argv + ["--regexp", q.pattern, "--", target]


def _strip_dot(line: str) -> str:
    return line[2:] if line.startswith("./") else line


def run_rg(rg: str, q: GrepQuery, target: str, ctx: ActionContext) -> list[str]:
    """ripgrep inside the sandbox when there is one: only what the shell could read is searched,
    so no link swapped in mid-search can reach a secret."""
    argv = rg_argv(rg, q, target)
    env = None
    if ctx.sandbox.enabled:
        argv = ctx.sandbox.argv(shlex.join(argv), ctx.root)
        env = ctx.sandbox.popen_env()
    proc = subprocess.run(argv, cwd=ctx.root, capture_output=True, timeout=120, env=env, stdin=subprocess.DEVNULL)
    if proc.returncode == 2 and not proc.stdout:
        msg = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise ValueError(msg[-1] if msg else "ripgrep failed")
    return [_strip_dot(ln) for ln in proc.stdout.decode("utf-8", "replace").splitlines()]


def _expand_braces(pattern: str) -> list[str]:
    m = re.search(r"\{([^{}]*)\}", pattern)
    if not m:
        return [pattern]
    out: list[str] = []
    for alt in m.group(1).split(","):
        out += _expand_braces(pattern[: m.start()] + alt + pattern[m.end() :])
    return out


def _glob_match(rel: str, glob: str) -> bool:
    negate = glob.startswith("!")
    pats = _expand_braces(glob[1:] if negate else glob)
    name = rel.rsplit("/", 1)[-1]
    hit = any(
        fnmatch.fnmatchcase(rel if "/" in p else name, p.lstrip("/"))
        or ("/" in p and p.startswith("**/") and fnmatch.fnmatchcase(name, p[3:]))
        for p in pats
    )
    return not hit if negate else hit


def _walk(base: Path, shown: str) -> list[tuple[str, Path, str]]:
    """(display path, real path, path relative to the search root), in rg's --sort path order."""
    if base.is_file():
        return [(shown, base, base.name)]
    found: list[tuple[tuple[str, ...], str, Path, str]] = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not os.path.islink(os.path.join(dirpath, d))]
        for f in filenames:
            full = Path(dirpath) / f
            if full.is_symlink() or not full.is_file():
                continue  # like rg: links are not followed, pipes and devices not read
            rel = full.relative_to(base).as_posix()
            disp = _strip_dot(f"{shown.rstrip('/')}/{rel}")
            found.append((tuple(rel.split("/")), disp, full, rel))
    found.sort(key=lambda t: t[0])
    return [(d, p, r) for _, d, p, r in found]


def _matched_lines(text: str, rx: re.Pattern[str], multiline: bool) -> list[int]:
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    if not multiline:
        return [i for i, ln in enumerate(lines) if rx.search(ln.rstrip("\r"))]
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln) + 1)
    hit: set[int] = set()
    import bisect

    for m in rx.finditer(text):
        end = m.end() - 1 if m.end() > m.start() else m.start()
        a = bisect.bisect_right(starts, m.start()) - 1
        b = bisect.bisect_right(starts, end) - 1
        hit.update(range(a, min(b, len(lines) - 1) + 1))
    return sorted(hit)


def run_python(q: GrepQuery, base: Path, shown: str) -> list[str]:
    """The same search and output as run_rg, without ripgrep."""
    flags = re.IGNORECASE if q.ignore_case else 0
    if q.multiline:
        flags |= re.DOTALL | re.MULTILINE
    rx = re.compile(q.pattern, flags)
    type_globs = None
    if q.type:
        if q.type not in FILE_TYPES:
            raise ValueError(f"unrecognized file type: {q.type} (known: {', '.join(sorted(FILE_TYPES))})")
        type_globs = FILE_TYPES[q.type]
    out: list[str] = []
    printed_any = False
    for disp, full, rel in _walk(base, shown):
        if q.glob and not base.is_file() and not _glob_match(rel, q.glob):
            continue
        if type_globs and not any(fnmatch.fnmatchcase(full.name, g) for g in type_globs):
            continue
        try:
            raw = read_bytes_nofollow(full, 64 << 20)
        except (OSError, ValueError, PathRefused):
            continue
        if b"\x00" in raw[:8192]:
            continue
        text = raw.decode("utf-8", "replace")
        matched = _matched_lines(text, rx, q.multiline)
        if not matched:
            continue
        if q.output_mode == "files_with_matches":
            out.append(disp)
            continue
        if q.output_mode == "count":
            out.append(f"{disp}:{len(matched)}")
            continue
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()
        hits = set(matched)
        ranges: list[list[int]] = []
        for m in matched:
            a, b = max(0, m - q.before), min(len(lines) - 1, m + q.after)
            if ranges and a <= ranges[-1][1] + 1:
                ranges[-1][1] = max(ranges[-1][1], b)
            else:
                ranges.append([a, b])
        for a, b in ranges:
            if printed_any and (q.before or q.after):
                out.append("--")
            for i in range(a, b + 1):
                sep = ":" if i in hits else "-"
                num = f"{i + 1}{sep}" if q.line_numbers else ""
                out.append(f"{disp}{sep}{num}{lines[i].rstrip(chr(13))}")
            printed_any = True
    return out


def find_rg() -> str | None:
    return shutil.which("rg")


class Grep:
    name = "Grep"
    writes = False
    runs_commands = False
    use_ripgrep: bool | None = None  # None: use rg when installed; False forces the Python search

    description = (
        "Searches file contents with a regular expression (ripgrep syntax), recursively.\n\n"
        '- pattern: e.g. "__global__\\s+void" or "def forward". Escape literal braces and '
        "parentheses.\n"
        "- path: file or directory (default: the workspace root). glob filters files "
        '("*.cu", "*.{cu,cpp}"); type filters by language (py, cuda, cpp, c, md, json, ...).\n'
        '- output_mode: "files_with_matches" (default: the paths), "content" (matching lines '
        "as path:line:text; context lines use '-' and groups are separated by --), or "
        '"count" (path:number of matching lines).\n'
        "- -i: case-insensitive. -n: line numbers in content mode (default true). -A/-B/-C: "
        "lines of context after/before/around each match (content mode).\n"
        "- multiline: let . and patterns span lines. head_limit: only the first N lines or "
        "entries of the output."
    )
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "The regular expression to search for"},
            "path": {"type": "string", "description": "File or directory to search (default: the workspace root)"},
            "glob": {"type": "string", "description": 'Glob to filter files, e.g. "*.cu" or "*.{cu,cpp}"'},
            "type": {"type": "string", "description": "File type to search, e.g. py, cuda, cpp"},
            "output_mode": {
                "type": "string",
                "enum": ["content", "files_with_matches", "count"],
                "description": "What to show (default files_with_matches)",
            },
            "-i": {"type": "boolean", "description": "Case-insensitive search"},
            "-n": {"type": "boolean", "description": "Show line numbers (content mode, default true)"},
            "-A": {"type": "integer", "minimum": 0, "description": "Lines of context after each match"},
            "-B": {"type": "integer", "minimum": 0, "description": "Lines of context before each match"},
            "-C": {"type": "integer", "minimum": 0, "description": "Lines of context before and after each match"},
            "head_limit": {"type": "integer", "minimum": 1, "description": "Show only the first N lines/entries"},
            "multiline": {"type": "boolean", "description": "Allow matches to span lines"},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }

    def run(self, args: dict[str, Any], ctx: ActionContext) -> ToolResult:
        mode = args.get("output_mode", "files_with_matches")
        ctxn = int(args.get("-C", 0))
        q = GrepQuery(
            pattern=args["pattern"],
            output_mode=mode,
            ignore_case=bool(args.get("-i")),
            line_numbers=bool(args.get("-n", True)),
            after=int(args.get("-A", ctxn)),
            before=int(args.get("-B", ctxn)),
            glob=args.get("glob"),
            type=args.get("type"),
            multiline=bool(args.get("multiline")),
            head_limit=args.get("head_limit"),
        )
        base = search_root(args.get("path"), ctx)
        shown = display(base, ctx.root)
        rg = find_rg() if self.use_ripgrep is not False else None
        if rg:
            lines = run_rg(rg, q, shown, ctx)
        else:
            re.compile(q.pattern)  # a bad pattern is reported before any file is read
            lines = run_python(q, base, shown)
        engine = "ripgrep" if rg else "python"
        if not lines:
            return ToolResult("No matches found", data={"matches": 0, "engine": engine})
        total = len(lines)
        if q.head_limit and total > q.head_limit:
            lines = lines[: q.head_limit] + [
                f"[{total - q.head_limit} more lines not shown (head_limit={q.head_limit})]"
            ]
        if mode == "files_with_matches":
            lines = [f"Found {total} file{'s' if total != 1 else ''}"] + lines
        return ToolResult("\n".join(lines), data={"matches": total, "engine": engine})

"""`@path` and `@path#10-40` mentions in a chat prompt: completion from the repository's files and
expansion into the file text the model is sent. Pure apart from reading files under the root.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

MENTION = re.compile(r"(?<![\w@])@([\w./\-]+)(?:#(\d+)(?:-(\d+))?)?")
SKIP_DIRS = {
    ".git",
    ".venv",
    "venv",
    "node_modules",
    "__pycache__",
    ".mypy_cache",
    ".pytest_cache",
    ".tox",
    "build",
    "dist",
    ".cuda-agent",
}
MAX_FILES = 20_000
MAX_MENTION_CHARS = 60_000


@dataclass(frozen=True)
class Mention:
    path: str
    start: int | None  # 1-based, inclusive
    end: int | None


def find_mentions(text: str) -> list[Mention]:
    out = []
    for m in MENTION.finditer(text):
        start = int(m.group(2)) if m.group(2) else None
        end = int(m.group(3)) if m.group(3) else start
        out.append(Mention(m.group(1).rstrip("."), start, end))
    return out


def repo_files(root: Path, limit: int = MAX_FILES) -> list[str]:
    """Relative paths of the repository's files, shallow ones first, skipping build and VCS dirs."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        rel_dir = Path(dirpath).relative_to(root)
        for name in sorted(filenames):
            found.append((rel_dir / name).as_posix())
            if len(found) >= limit:
                return sorted(found, key=lambda p: (p.count("/"), p))
    return sorted(found, key=lambda p: (p.count("/"), p))


def complete(partial: str, files: list[str], limit: int = 8) -> list[str]:
    """Files matching what follows `@`: prefix matches first, then those containing it."""
    needle = partial.lower()
    starts = [f for f in files if f.lower().startswith(needle)]
    names = [f for f in files if f not in starts and Path(f).name.lower().startswith(needle)]
    inner = [f for f in files if f not in starts and f not in names and needle in f.lower()]
    return (starts + names + inner)[:limit]


def trailing_mention(text: str) -> str | None:
    """The partial `@path` being typed at the end of `text`, if any."""
    m = re.search(r"(?:^|\s)@([\w./\-]*)$", text)
    return m.group(1) if m else None


def expand(text: str, root: Path) -> tuple[str, list[str]]:
    """The prompt with each mentioned file's text appended; also one problem line per bad mention."""
    blocks: list[str] = []
    problems: list[str] = []
    root = root.resolve()
    seen: set[Mention] = set()
    for m in find_mentions(text):
        if m in seen:
            continue
        seen.add(m)
        path = (root / m.path).resolve()
        if path != root and root not in path.parents:
            problems.append(f"@{m.path} is outside the repository")
            continue
        if not path.is_file():
            problems.append(f"@{m.path} is not a file in the repository")
            continue
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            problems.append(f"@{m.path} is not a UTF-8 text file")
            continue
        lo = max(1, m.start or 1)
        hi = min(len(lines), m.end or len(lines))
        if m.start is not None and lo > len(lines):
            problems.append(f"@{m.path}#{m.start} is past the end ({len(lines)} lines)")
            continue
        body = "\n".join(lines[lo - 1 : hi])[:MAX_MENTION_CHARS]
        where = f"{m.path} (lines {lo}-{hi})" if m.start is not None else m.path
        lang = path.suffix.lstrip(".")
        blocks.append(f"Contents of {where}:\n```{lang}\n{body}\n```")
    if not blocks:
        return text, problems
    return text + "\n\n" + "\n\n".join(blocks), problems

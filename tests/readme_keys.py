"""The `--batch --json` keys README.md documents, read from its table (tests compare real output)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
HEADING = "### The `--batch --json` result"


ALL_HEADING = "### Every target of a repository: `optimize --all`"


def _section(heading: str = HEADING) -> str:
    text = README.read_text()
    start = text.index(heading)
    end = text.find("\n#", start + len(heading))
    return text[start : end if end != -1 else len(text)]


def documented_result_keys() -> list[str]:
    """The first column of the table, in order."""
    return re.findall(r"^\| `([a-z_]+)` \|", _section(), re.M)


def documented_summary_keys() -> list[str]:
    """The keys of `optimize --all`'s summary object, from its table."""
    return re.findall(r"^\| `([a-z_]+)` \|", _section(ALL_HEADING), re.M)


def documented_error_keys() -> list[str]:
    """The keys of the error object the section shows as `{"status": "error", ...}`."""
    found = re.search(r'`(\{"status": "error".*?\})`', _section(), re.S)
    assert found, "README.md no longer shows the error object"
    return re.findall(r'"([a-z_]+)":', found.group(1))

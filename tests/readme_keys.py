"""The `--batch --json` keys README.md documents, read from its table (tests compare real output)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
HEADING = "### The `--batch --json` result"


def _section() -> str:
    text = README.read_text()
    start = text.index(HEADING)
    end = text.find("\n#", start + len(HEADING))
    return text[start:end if end != -1 else len(text)]


def documented_result_keys() -> list[str]:
    """The first column of the table, in order."""
    return re.findall(r"^\| `([a-z_]+)` \|", _section(), re.M)


def documented_error_keys() -> list[str]:
    """The keys of the error object the section shows as `{"status": "error", ...}`."""
    found = re.search(r'`(\{"status": "error".*?\})`', _section(), re.S)
    assert found, "README.md no longer shows the error object"
    return re.findall(r'"([a-z_]+)":', found.group(1))

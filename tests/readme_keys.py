"""The `--batch --json` keys docs/optimize.md documents, read from its tables (tests compare real output).

The README points there; the module keeps its name, since tests import it as `readme_keys`."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "optimize.md"
HEADING = "## The `--batch --json` result"


ALL_HEADING = "## Every target of a repository: `optimize --all`"


def _section(heading: str = HEADING) -> str:
    text = DOC.read_text()
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
    assert found, "docs/optimize.md no longer shows the error object"
    return re.findall(r'"([a-z_]+)":', found.group(1))

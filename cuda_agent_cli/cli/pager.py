"""Long text through the user's pager, as git does: $PAGER, else `less -R` (colours kept)."""

from __future__ import annotations

import os
import subprocess
from typing import Mapping

DEFAULT_PAGER = "less -R"


def pager_command(env: Mapping[str, str] | None = None) -> str | None:
    """The command to page with, or None where paging is turned off (PAGER empty or `cat`)."""
    env = os.environ if env is None else env
    command = env.get("PAGER", DEFAULT_PAGER).strip()
    return None if command in ("", "cat") else command


def page(text: str, env: Mapping[str, str] | None = None) -> bool:
    """Show `text` through the pager and wait for it to close; False when no pager ran, so the
    caller prints the text itself. Quitting the pager early is fine (the rest is not needed)."""
    command = pager_command(env)
    if command is None:
        return False
    try:
        proc = subprocess.Popen(
            command, shell=True, stdin=subprocess.PIPE, env=dict(os.environ if env is None else env)
        )
    except OSError:
        return False
    assert proc.stdin is not None
    try:
        proc.stdin.write(text.encode("utf-8", errors="replace"))
        proc.stdin.close()
    except BrokenPipeError:
        pass
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        proc.wait()  # the pager owns the terminal until it exits
        raise
    return code != 127  # the shell's "command not found": nothing was shown

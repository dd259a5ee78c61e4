"""Checks of paths a command will write to, made before a session starts.

A session can run for many minutes before it writes its patch, its transcript or the kernel
into the repository; a path that cannot take the write is refused here, with one line, instead.
Writability is decided by trying (an unnamed temporary file), because permission bits do not
tell the whole story: root ignores them, and read-only mounts and ACLs are not in them.
"""

from __future__ import annotations

import errno
import tempfile
from pathlib import Path

from cuda_agent_cli.errors import BadInput


def cannot_write_in(directory: Path) -> str | None:
    """Why no file can be created in `directory`, or None when one can."""
    try:
        with tempfile.TemporaryFile(dir=directory):
            return None
    except FileNotFoundError:
        return f"{directory} does not exist"
    except NotADirectoryError:
        return f"{directory} is not a folder"
    except PermissionError:
        return f"{directory} is not writable (permission denied)"
    except OSError as exc:
        if exc.errno == errno.EROFS:
            return f"{directory} is on a read-only file system"
        return f"{directory} cannot be written: {exc.strerror or exc}"


def cannot_create(directory: Path) -> str | None:
    """Why `directory` cannot be used as a folder to write in (creating it if need be), or None."""
    here = directory
    while not here.exists():
        if here.parent == here:
            break
        here = here.parent
    if here.exists() and not here.is_dir():
        return (
            f"{here} is a file, not a folder"
            if here == directory
            else f"{here} is a file, so {directory} cannot be made"
        )
    return cannot_write_in(here)


def check_patch_file(path: Path) -> Path:
    """--patch FILE: a new file in an existing, writable folder. An existing file is not replaced:
    it may be a patch the user still needs."""
    path = path.expanduser()
    shown = str(path)
    if path.is_dir():
        raise BadInput(f"--patch {shown} is a folder", f"give a file name, such as --patch {path / 'kernel.diff'}")
    if path.exists() or path.is_symlink():
        raise BadInput(f"--patch {shown} already exists", "remove it, or choose another file name")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.exists():
        raise BadInput(
            f"--patch {shown}: the folder {folder} does not exist", "create it first, or choose another path"
        )
    problem = cannot_write_in(folder)
    if problem:
        raise BadInput(f"--patch {shown} cannot be written: {problem}", "choose a path in a folder you can write to")
    return path.resolve()


def check_store(directory: Path, what: str, hint: str) -> None:
    """A folder cuda-agent keeps its own files in (sessions, build cache), made when missing."""
    problem = cannot_create(directory)
    if problem:
        raise BadInput(f"the {what} {directory} cannot be used: {problem}", hint)


def check_demo_dir(directory: Path) -> None:
    """demo --dir: a new or empty folder that can be made and written."""
    if directory.exists() and not directory.is_dir():
        raise BadInput(f"--dir {directory} is a file", "pass --dir with a new or empty folder")
    if directory.is_dir() and any(directory.iterdir()):
        raise BadInput(f"{directory} is not empty", "pass --dir with a new or empty folder")
    problem = cannot_create(directory)
    if problem:
        raise BadInput(f"--dir {directory} cannot be used: {problem}", "pass --dir with a folder you can write to")

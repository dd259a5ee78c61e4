"""Path resolution and the read/write rules the file tools enforce themselves.

Every check runs on the fully resolved path (symlinks, `..`, renamed parents), the same rules
the sandbox's mounts enforce on the shell: writes only inside the policy's writable entries,
never on a locked or protected file; reads nowhere a secret could live. Writing then walks the
resolved path one directory at a time with O_NOFOLLOW, so a symlink swapped in between the
check and the write (by a background shell) makes the write fail instead of escaping.
"""

from __future__ import annotations

import os
from pathlib import Path

from cuda_agent_cli.sandbox import SandboxPolicy, default_hidden, toolchain_paths


class PathRefused(Exception):
    """A path the agent may not read or write; the message is shown to the model."""


def _under(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def resolve(path: str, root: Path) -> Path:
    """Absolute or root-relative `path`, with every symlink and `..` resolved."""
    if not path or "\x00" in path:
        raise PathRefused("empty or malformed path")
    p = Path(path)
    if not p.is_absolute():
        p = root / p
    return Path(os.path.realpath(p))


def display(path: Path, root: Path) -> str:
    """Workspace-relative when inside it, else absolute: what the model reads back."""
    try:
        rel = path.relative_to(root)
    except ValueError:
        return str(path)
    return str(rel) if str(rel) != "." else "."


def relative(resolved: Path, policy: SandboxPolicy) -> str | None:
    try:
        return resolved.relative_to(policy.root).as_posix()
    except ValueError:
        return None


def _matches(rel: str, entry: str) -> bool:
    entry = entry.strip("/")
    return entry in ("", ".") or rel == entry or rel.startswith(entry + "/")


def _writable_summary(policy: SandboxPolicy) -> str:
    names = [("the workspace" if e in (".", "") else e) for e in policy.writable]
    return ", ".join(names)


def check_write(path: str, policy: SandboxPolicy) -> Path:
    """The resolved path when the agent may write it, else PathRefused with the reason."""
    root = policy.root
    target = resolve(path, root)
    rel = relative(target, policy)
    if rel is None or rel == ".":
        raise PathRefused(
            f"{path}: writing outside the writable areas is not allowed (writable: {_writable_summary(policy)})"
        )
    for entry in policy.locked:
        if rel == entry.strip("/") or rel.startswith(entry.strip("/") + "/"):
            raise PathRefused(
                f"{path}: {entry} is locked (the harness owns it); write your changes in {_writable_summary(policy)}"
            )
    for entry in policy.protected:
        if _matches(rel, entry):
            raise PathRefused(f"{path}: {entry} is protected and cannot be written")
    if not any(_matches(rel, e) for e in policy.writable):
        raise PathRefused(f"{path}: only {_writable_summary(policy)} may be written")
    _refuse_locked_inode(target, policy)
    return target


def _refuse_locked_inode(target: Path, policy: SandboxPolicy) -> None:
    # A hard link to a locked file would pass every name check.
    try:
        st = os.stat(target, follow_symlinks=False)
    except OSError:
        return
    if st.st_nlink < 2:
        return
    for entry in policy.locked:
        try:
            lst = os.stat(policy.root / entry, follow_symlinks=False)
        except OSError:
            continue
        if (lst.st_dev, lst.st_ino) == (st.st_dev, st.st_ino):
            raise PathRefused(f"{target.name} is a hard link to the locked file {entry}")


def check_read(path: str, policy: SandboxPolicy, extra: tuple[Path, ...] = ()) -> Path:
    """The resolved path when the agent may read it: not /proc, not a hidden secret place."""
    root = policy.root
    target = resolve(path, root)
    allowed = (root, policy.scratch_dir, *extra)
    if any(_under(target, a) for a in allowed):
        return target
    if _under(target, Path("/proc")) or _under(target, Path("/sys/firmware")):
        raise PathRefused(f"{path}: process and firmware information is not readable")
    hidden = (*default_hidden(), *(Path(os.path.realpath(h)) for h in policy.hidden), Path("/tmp"))
    shown = (*toolchain_paths(), *(Path(os.path.realpath(e)) for e in policy.exposed))
    for h in hidden:
        if _under(target, h) and not any(_under(target, s) for s in shown):
            raise PathRefused(
                f"{path}: not visible to the agent (home directories, /tmp and "
                f"secret locations are hidden); work inside {root}"
            )
    return target


def write_file(target: Path, data: bytes, policy: SandboxPolicy) -> None:
    """Write `data` to an already-checked resolved path, creating missing parent dirs.

    Walks down from the workspace root with O_NOFOLLOW; new files and dirs are handed to the
    sandbox uid when the shell runs as another uid than this process.
    """
    root = policy.root
    rel_parts = target.relative_to(root).parts
    owner = policy.owner() if os.geteuid() == 0 else None
    flags_dir = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(root, flags_dir)
    try:
        for part in rel_parts[:-1]:
            try:
                nfd = os.open(part, flags_dir, dir_fd=fd)
            except FileNotFoundError:
                os.mkdir(part, 0o755, dir_fd=fd)
                if owner:
                    os.chown(part, *owner, dir_fd=fd, follow_symlinks=False)
                nfd = os.open(part, flags_dir, dir_fd=fd)
            except OSError as exc:
                raise PathRefused(
                    f"{target}: a parent directory is a symbolic link or not a directory ({exc.strerror})"
                ) from None
            os.close(fd)
            fd = nfd
        name = rel_parts[-1]
        existed = True
        try:
            os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            existed = False
        try:
            ffd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=fd)
        except OSError as exc:
            raise PathRefused(f"{target}: cannot be written ({exc.strerror})") from None
        try:
            view = memoryview(data)
            while view:
                n = os.write(ffd, view)
                view = view[n:]
            if owner and not existed:
                os.fchown(ffd, *owner)
        finally:
            os.close(ffd)
    finally:
        os.close(fd)


def read_bytes_nofollow(target: Path, limit: int) -> bytes:
    """The bytes of a resolved path, opened one component at a time without following links.

    check_read judged the resolved path; a background shell could swap a symlink to a secret
    in its place before the open, and this open then fails instead of following it.
    """
    flags_dir = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open("/", flags_dir)
    try:
        for part in target.parts[1:-1]:
            try:
                nfd = os.open(part, flags_dir, dir_fd=fd)
            except OSError as exc:
                raise PathRefused(
                    f"{target}: a parent directory changed into a link or vanished ({exc.strerror})"
                ) from None
            os.close(fd)
            fd = nfd
        try:
            ffd = os.open(target.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=fd)
        except OSError as exc:
            raise PathRefused(f"{target}: cannot be opened ({exc.strerror})") from None
    finally:
        os.close(fd)
    try:
        import stat as st_mod

        info = os.fstat(ffd)
        if not st_mod.S_ISREG(info.st_mode):
            raise ValueError(f"{target} is not a regular file")
        if info.st_size > limit:
            raise ValueError(
                f"{target} is {info.st_size >> 20} MiB; too large for the file tools, use Grep or Bash head/tail"
            )
        chunks = []
        while True:
            chunk = os.read(ffd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(ffd)

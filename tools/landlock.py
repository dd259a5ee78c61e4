"""Locked: confine a job's file writes with Linux Landlock before candidate code runs.

The candidate's process runs as the user, and C++ that reaches Python (or plain syscalls) can
open any file the user can: the cached baselines that later rounds read, the build directories
of the next round, the user's repository. Landlock lets an unprivileged process give up that
right for itself and every process it starts, irreversibly: after `restrict_writes(dirs)` files
may be created, written, truncated, renamed or removed only beneath `dirs` (and character
devices such as /dev/null and the GPU's nodes may be opened for writing, as may the process's own
thread files under /proc, which the CUDA driver needs). Reading stays allowed everywhere. Kernels without Landlock (before 5.13, or with it disabled) leave the process as it
was; `restrict_writes` then says so and the harness records it.
"""

from __future__ import annotations

import ctypes
import os
import stat
from typing import Iterable

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # x86_64 and arm64 alike
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

_WRITE_FILE = 1 << 1
_REMOVE_DIR, _REMOVE_FILE = 1 << 4, 1 << 5
_MAKE_CHAR, _MAKE_DIR, _MAKE_REG, _MAKE_SOCK, _MAKE_FIFO, _MAKE_BLOCK, _MAKE_SYM = (1 << n for n in range(6, 13))
_REFER = 1 << 13  # ABI 2: renames and links across directories
_TRUNCATE = 1 << 14  # ABI 3


_SCOPE_SIGNAL = 1 << 1  # ABI 6


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]


class _ScopedRulesetAttr(ctypes.Structure):
    # ABI 6: handled_access_net (ABI 4) and scoped follow; 0 for net leaves the network as it is.
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is not available."""
    try:
        version = _libc().syscall(
            _SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)
        )
    except (OSError, AttributeError):
        return 0
    return max(0, int(version))


def device_nodes() -> list[str]:
    """Character devices a job may open for writing: /dev/null, the GPU's nodes and the like.

    Listed one by one rather than all of /dev, whose /dev/shm holds the harness's own files."""
    found = []
    for folder in ("/dev", "/dev/nvidia-caps", "/dev/dri"):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if stat.S_ISCHR(entry.stat(follow_symlinks=True).st_mode):
                    found.append(entry.path)
            except OSError:
                continue
    return found


def restrict_writes(writable: Iterable[str]) -> str:
    """Allow file writes only beneath `writable` (plus device nodes); returns what was done."""
    writable = list(writable)
    abi = abi_version()
    if abi < 1:
        return "not available (Landlock is not enabled in this kernel)"
    libc = _libc()
    handled = (
        _WRITE_FILE
        | _REMOVE_DIR
        | _REMOVE_FILE
        | _MAKE_CHAR
        | _MAKE_DIR
        | _MAKE_REG
        | _MAKE_SOCK
        | _MAKE_FIFO
        | _MAKE_BLOCK
        | _MAKE_SYM
    )
    if abi >= 2:
        handled |= _REFER
    if abi >= 3:
        handled |= _TRUNCATE
    # ABI 6 also scopes signals: the process (and what it starts) can no longer stop, kill or
    # otherwise signal a process outside its own domain, such as the baselines being timed.
    attr: ctypes.Structure = _ScopedRulesetAttr(handled, 0, _SCOPE_SIGNAL) if abi >= 6 else _RulesetAttr(handled)
    ruleset = libc.syscall(
        _SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0)
    )
    if ruleset < 0:
        return f"not applied (creating the ruleset failed: {os.strerror(ctypes.get_errno())})"
    try:
        allowed = []
        file_rights = _WRITE_FILE | (_TRUNCATE if abi >= 3 else 0)
        rules = [(path, handled) for path in writable] + [(path, file_rights) for path in device_nodes()]
        # The CUDA driver names its helper threads through /proc/self/task/<tid>/comm and fails
        # to initialize (error 304) when it cannot. This is the process's own directory, resolved
        # now; Landlock forbids reaching other processes' memory through /proc regardless.
        rules.append(("/proc/self/task", file_rights))
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a directory that does not exist needs no rule
            try:
                if not os.path.isdir(path):
                    rights &= file_rights
                rule = _PathBeneathAttr(rights, fd)
                if (
                    libc.syscall(
                        _SYS_ADD_RULE,
                        ctypes.c_int(ruleset),
                        ctypes.c_int(_RULE_PATH_BENEATH),
                        ctypes.byref(rule),
                        ctypes.c_uint32(0),
                    )
                    != 0
                ):
                    return f"not applied (a rule for {path} failed: {os.strerror(ctypes.get_errno())})"
                allowed.append(path)
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return f"not applied (no_new_privs failed: {os.strerror(ctypes.get_errno())})"
        if libc.syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return f"not applied (restrict_self failed: {os.strerror(ctypes.get_errno())})"
    finally:
        os.close(ruleset)
    folders = [p for p in allowed if p in set(writable) and os.path.isdir(p)]
    signals = "; it cannot signal processes outside it" if abi >= 6 else ""
    return (
        f"Landlock ABI {abi}: the candidate's process may write only its own {len(folders)} output, "
        f"temp and cache folders and device nodes{signals}"
    )

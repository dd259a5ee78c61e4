"""Locked: a seccomp filter for the candidate's process, installed before its code runs.

The candidate's work must happen in its own process, where the clocks and the thread count see
it, and must not reach other processes. The filter refuses (EPERM), for every thread of the
process:
- new processes: fork, vfork and clone without CLONE_THREAD (threads stay allowed); clone3,
  whose flags a filter cannot read, answers ENOSYS, so the C library falls back to clone;
- running other programs: execve, execveat;
- reaching other processes: ptrace, process_vm_readv/writev, perf_event_open, kcmp, pidfd_*,
  and kill, tgkill and the sigqueue calls aimed at any process but this one; the scheduling,
  priority and limit calls (sched_setaffinity, sched_setscheduler, sched_setparam,
  sched_setattr, prlimit64, migrate_pages, move_pages, setpriority, ioprio_set) aimed at any
  process but this one, so it cannot renice, re-pin or starve the baselines' process;
- changing the machine or its namespaces: bpf, mount, umount2, setns, unshare, the module and
  kexec calls, userfaultfd, iopl and ioperm.

Standard library only (ctypes). Where the kernel or the architecture does not allow a filter,
`install` says so and nothing is installed; the result records it.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct
from typing import Any, TypedDict

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_SECCOMP_SET_MODE_FILTER = 1
_SECCOMP_FILTER_FLAG_TSYNC = 1
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_EPERM, _ENOSYS = 1, 38
_CLONE_THREAD = 0x00010000
_X32_BIT = 0x40000000

# BPF opcodes
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JSET_K = 0x45
_JGE_K = 0x35
_RET_K = 0x06


class _Arch(TypedDict):
    """One architecture's syscall numbers, by what the filter does with them."""

    audit: int  # its AUDIT_ARCH value
    seccomp: int
    deny: dict[str, int]  # refused whatever their arguments
    clone: int
    clone3: int
    own_pid: dict[str, int]  # signals: allowed only to this process
    self_pid: dict[str, int]
    which_who: dict[str, tuple[int, int]]


_ARCHES: dict[str, _Arch] = {
    "x86_64": {
        "audit": 0xC000003E,
        "seccomp": 317,
        "deny": {
            "fork": 57,
            "vfork": 58,
            "execve": 59,
            "execveat": 322,
            "ptrace": 101,
            "perf_event_open": 298,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
            "kcmp": 312,
            "tkill": 200,
            "pidfd_open": 434,
            "pidfd_send_signal": 424,
            "pidfd_getfd": 438,
            "bpf": 321,
            "mount": 165,
            "umount2": 166,
            "setns": 308,
            "unshare": 272,
            "init_module": 175,
            "finit_module": 313,
            "delete_module": 176,
            "kexec_load": 246,
            "kexec_file_load": 320,
            "userfaultfd": 323,
            "iopl": 172,
            "ioperm": 173,
            "process_madvise": 440,
        },
        "clone": 56,
        "clone3": 435,
        "own_pid": {"kill": 62, "tgkill": 234, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297},
        # The first argument names the process; 0 is the caller itself.
        "self_pid": {
            "sched_setaffinity": 203,
            "sched_setscheduler": 144,
            "sched_setparam": 142,
            "sched_setattr": 314,
            "prlimit64": 302,
            "migrate_pages": 256,
            "move_pages": 279,
        },
        # (which, who): who names the process when which is the first of the kinds (a process).
        "which_who": {"setpriority": (141, 0), "ioprio_set": (251, 1)},
    },
    "aarch64": {
        "audit": 0xC00000B7,
        "seccomp": 277,
        "deny": {
            "execve": 221,
            "execveat": 281,
            "ptrace": 117,
            "perf_event_open": 241,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
            "kcmp": 272,
            "tkill": 130,
            "pidfd_open": 434,
            "pidfd_send_signal": 424,
            "pidfd_getfd": 438,
            "bpf": 280,
            "mount": 40,
            "umount2": 39,
            "setns": 268,
            "unshare": 97,
            "init_module": 105,
            "finit_module": 273,
            "delete_module": 106,
            "kexec_load": 104,
            "kexec_file_load": 294,
            "userfaultfd": 282,
            "process_madvise": 440,
        },
        "clone": 220,
        "clone3": 435,
        "own_pid": {"kill": 129, "tgkill": 131, "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240},
        "self_pid": {
            "sched_setaffinity": 122,
            "sched_setscheduler": 119,
            "sched_setparam": 118,
            "sched_setattr": 274,
            "prlimit64": 261,
            "migrate_pages": 238,
            "move_pages": 239,
        },
        "which_who": {"setpriority": (140, 0), "ioprio_set": (30, 1)},
    },
}


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k & 0xFFFFFFFF)


def program(arch: str, pid: int) -> bytes:
    """The filter for `arch`, letting signals reach `pid` (this process) only."""
    a = _ARCHES[arch]
    deny_eperm = _RET_ERRNO | _EPERM
    # Plain syscall-number matches, each jumping to one of the returns at the end of the program.
    checks = [(nr, "eperm") for nr in a["deny"].values()] + [(a["clone3"], "enosys")]
    # Layout: arch check, syscall number, x32 check, plain matches, clone's flags, the signal
    # calls' target pid, then the returns; labels are resolved to jump offsets below.
    insns: list[tuple[Any, ...]] = []  # (op, operands...), labels resolved below
    insns.append(("ld", 4))  # arch
    insns.append(("jeq", a["audit"], None, "foreign_abi"))  # another ABI (32-bit): refuse it all
    insns.append(("ld", 0))  # syscall number
    if arch == "x86_64":
        insns.append(("jge", _X32_BIT, "eperm", None))
    for nr, outcome in checks:
        insns.append(("jeq", nr, outcome, None))
    insns.append(("jeq", a["clone"], None, "after_clone"))
    insns.append(("ld", 16))  # clone's flags (low 32 bits of the first argument)
    insns.append(("jset", _CLONE_THREAD, "allow", "eperm"))
    insns.append(("label", "after_clone"))
    for nr in a["own_pid"].values():
        insns.append(("jeq", nr, None, f"after_{nr}"))
        insns.append(("ld", 16))  # the target pid (or thread group)
        insns.append(("jeq", pid, "allow", "eperm"))
        insns.append(("label", f"after_{nr}"))
        insns.append(("ld", 0))
    for nr in a["self_pid"].values():
        insns.append(("jeq", nr, None, f"after_{nr}"))
        insns.append(("ld", 16))  # the process it names: 0 (itself) or its own pid
        insns.append(("jeq", 0, "allow", None))
        insns.append(("jeq", pid, "allow", "eperm"))
        insns.append(("label", f"after_{nr}"))
        insns.append(("ld", 0))
    for nr, process_kind in a["which_who"].values():
        insns.append(("jeq", nr, None, f"after_{nr}"))
        insns.append(("ld", 16))  # which: only a single process may be named
        insns.append(("jeq", process_kind, None, "eperm"))
        insns.append(("ld", 24))  # who: 0 (itself) or its own pid
        insns.append(("jeq", 0, "allow", None))
        insns.append(("jeq", pid, "allow", "eperm"))
        insns.append(("label", f"after_{nr}"))
        insns.append(("ld", 0))
    insns.append(("label", "allow"))
    insns.append(("ret", _RET_ALLOW))
    insns.append(("label", "eperm"))
    insns.append(("ret", deny_eperm))
    insns.append(("label", "enosys"))
    insns.append(("ret", _RET_ERRNO | _ENOSYS))
    insns.append(("label", "foreign_abi"))
    insns.append(("ret", deny_eperm))
    # Resolve labels to instruction indices.
    positions: dict[str, int] = {}
    index = 0
    for ins in insns:
        if ins[0] == "label":
            positions[ins[1]] = index
        else:
            index += 1
    code: list[bytes] = []
    index = 0
    for ins in insns:
        if ins[0] == "label":
            continue

        def rel(target: str | None) -> int:
            if target is None:
                return 0
            offset = positions[target] - index - 1
            if not 0 <= offset <= 255:
                raise ValueError("filter jump out of range")
            return offset

        kind = ins[0]
        if kind == "ld":
            code.append(_insn(_LD_W_ABS, ins[1]))
        elif kind == "ret":
            code.append(_insn(_RET_K, ins[1]))
        else:
            op = {"jeq": _JEQ_K, "jset": _JSET_K, "jge": _JGE_K}[kind]
            code.append(_insn(op, ins[1], rel(ins[2]), rel(ins[3])))
        index += 1
    return b"".join(code)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install() -> str:
    """Install the filter on every thread of this process; returns what took effect."""
    arch = platform.machine()
    if arch not in _ARCHES:
        return f"not installed: no filter for {arch}"
    code = program(arch, os.getpid())
    buf = ctypes.create_string_buffer(code, len(code))
    prog = _SockFprog(len(code) // 8, ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return f"not installed: no_new_privs failed ({os.strerror(ctypes.get_errno())})"
    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    if syscall(_ARCHES[arch]["seccomp"], _SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC, ctypes.byref(prog)) == 0:
        return "seccomp: no new processes, no programs run, no other process reached (every thread)"
    errno = ctypes.get_errno()
    return f"not installed: seccomp refused the filter ({os.strerror(errno)})"

"""The bubblewrap sandbox every agent shell command runs in (docs/security.md, threats 17-21).

A `SandboxPolicy` says what the agent may write (the same rules the file tools enforce), what
stays locked, and the resource limits; `Sandbox.argv()` turns it into one bwrap command line:

- the host root read-only, a private /tmp and /dev/shm, a fresh /proc, a minimal /dev plus the
  device nodes of the GPUs CUDA_VISIBLE_DEVICES names (--dev-bind, see gpu_nodes), so CUDA
  works inside on those GPUs only;
- the real home directories, /root, /run and other secret places hidden under empty tmpfs, with
  only the Python and CUDA installations that live there mounted back read-only;
- the workspace read-only, its writable entries (kernels/, model_new.py, scratch/) bound
  read-write, and the locked files bound read-only over themselves: a read-only bind mount
  cannot be written, chmod-ed, renamed, replaced or hard-linked from inside;
- new pid, net, ipc and uts namespaces (no network at all), --die-with-parent, a new session,
  an environment rebuilt from a short allowlist (never keys or tokens), rlimits on processes,
  file size and data segment.

RLIMIT_NPROC does not bind real root, and a user namespace maps the sandbox back to uid 0, so
when cuda-agent runs as root the command drops to an unprivileged uid (65534) inside the
sandbox; the workspace's writable entries are handed to that uid by `prepare()`. The limit counts
the uid's tasks (processes and threads): in a user namespace (non-root callers) those of this
sandbox only; after the uid drop, every task of uid 65534 on the host.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from cuda_agent_cli.errors import EnvironmentMissing
from cuda_agent_cli.gpu_nodes import nodes_for

INSTALL_HINT = (
    "install bubblewrap (apt-get install bubblewrap, or dnf install bubblewrap) and make sure "
    "user namespaces are enabled; --unsafe-no-sandbox runs the agent's commands unconfined"
)
UNSAFE_BANNER = "UNSAFE: no sandbox — the agent's shell commands run unconfined on this machine"

NOBODY = 65534
SANDBOX_HOME = "/tmp/home"
# Names passed from the host environment into the sandbox when set. Nothing that can hold a
# credential: the filter below drops anything key- or token-like even if added here by mistake.
ENV_PASSTHROUGH = (
    "LANG",
    "LC_ALL",
    "TZ",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "TORCH_CUDA_ARCH_LIST",
    "LD_LIBRARY_PATH",
    "MAX_JOBS",
    "CC",
    "CXX",
)
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION", re.I)
_SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


# The default process cap: a few hundred leaves a torch process with a thread per core on a
# 128-core host, plus a parallel build, well inside it.
PROCESS_CAP = 512


def _default_data_limit() -> int:
    """Per-process data segment: generous enough for nvcc and torch, bounded by the machine."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 16 << 30
    return max(8 << 30, total)


@dataclass(frozen=True)
class Limits:
    """rlimits applied to every sandboxed command and its children.

    RLIMIT_DATA rather than RLIMIT_AS: CUDA reserves terabytes of virtual address space that
    are never backed, which an address-space limit would refuse.
    """

    # Processes and threads of the sandbox uid. Honest work peaks far below it (nvcc 7 tasks, a
    # torch extension build 10, torch's thread pool about one thread per core: see
    # benchmarks/sandbox_process_peak.py); a fork bomb stops here instead of filling the machine.
    nproc: int = PROCESS_CAP
    file_size: int = 16 << 30  # bytes, largest file a command may write
    data: int = field(default_factory=_default_data_limit)  # bytes, per process
    nofile: int = 65536
    tmp_size: int = field(
        default_factory=lambda: min(16 << 30, _default_data_limit() // 4)
    )  # bytes of private /tmp and /dev/shm


@dataclass(frozen=True)
class SandboxPolicy:
    """What the agent may touch. Relative entries are relative to `root`.

    `writable` entries are files or directories (a directory covers everything below it, "."
    covers the whole root); `locked` and `protected` entries stay read-only even inside a
    writable one (locked: the harness's files; protected: e.g. a repository's .git).
    """

    root: Path
    writable: tuple[str, ...] = ("kernels", "model_new.py", "scratch")
    locked: tuple[str, ...] = ()
    protected: tuple[str, ...] = ()
    scratch: str = "scratch"
    limits: Limits = field(default_factory=Limits)
    # uid/gid the command runs as; None keeps the caller's. Defaults to nobody when root.
    sandbox_uid: int | None = None
    sandbox_gid: int | None = None
    gpu: bool = True
    hidden: tuple[Path, ...] = ()  # extra paths to hide, beyond default_hidden()
    exposed: tuple[Path, ...] = ()  # extra read-only paths to show inside hidden ones

    @classmethod
    def optimize(cls, root: Path, locked: list[str] | tuple[str, ...] = (), **kw: object) -> "SandboxPolicy":
        """The optimize workspace: kernels/, model_new.py and scratch/ writable, nothing else."""
        uid = NOBODY if os.geteuid() == 0 else None
        base = dict(root=Path(os.path.realpath(root)), locked=tuple(locked), sandbox_uid=uid, sandbox_gid=uid)
        base.update(kw)
        return cls(**base)  # type: ignore[arg-type]

    @classmethod
    def repository(cls, root: Path, scratch: str = ".cuda-agent/scratch", **kw: object) -> "SandboxPolicy":
        """Chat over a user's repository: everything writable except .git.

        The caller's uid is kept (handing a user's files to another uid would be a surprise),
        so as root the process limit cannot bind; timeouts still kill the whole sandbox.
        """
        base = dict(root=Path(os.path.realpath(root)), writable=(".",), protected=(".git",), scratch=scratch)
        base.update(kw)
        return cls(**base)  # type: ignore[arg-type]

    @property
    def scratch_dir(self) -> Path:
        return self.root / self.scratch

    def owner(self) -> tuple[int, int] | None:
        """The uid/gid files the agent may write must belong to, when it is not the caller's."""
        if self.sandbox_uid is None:
            return None
        gid = self.sandbox_gid if self.sandbox_gid is not None else self.sandbox_uid
        return self.sandbox_uid, gid


def default_hidden(env: dict[str, str] | None = None) -> tuple[Path, ...]:
    """Home directories and other places secrets live: replaced by empty tmpfs inside."""
    env = dict(os.environ) if env is None else env
    spots = ["/root", "/home", "/run", "/var/run", "/mnt", "/media", "/srv", "/var/lib/docker"]
    if env.get("HOME"):
        spots.append(env["HOME"])
    out: list[Path] = []
    for s in spots:
        real = Path(os.path.realpath(s))
        if real != Path("/") and real.is_dir() and real not in out:
            out.append(real)
    return tuple(out)


def toolchain_paths(env: dict[str, str] | None = None) -> tuple[Path, ...]:
    """Installations honest work needs: this Python (and its venv) and the CUDA toolkit."""
    env = dict(os.environ) if env is None else env
    cands = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        sys.base_exec_prefix,
        str(Path(os.path.realpath(sys.executable)).parent.parent),
    }
    for name in ("CUDA_HOME", "CUDA_PATH", "VIRTUAL_ENV", "CONDA_PREFIX"):
        if env.get(name):
            cands.add(env[name])
    # Packages can live in a user site or an editable checkout under a home directory.
    homes = {Path(os.path.realpath(h)) for h in ("/root", "/home", env.get("HOME") or "/root")}
    for entry in sys.path:
        if entry and Path(entry).is_absolute():
            real = Path(os.path.realpath(entry))
            if real not in homes and real.parent != Path("/home"):
                cands.add(entry)
    out: list[Path] = []
    for c in sorted(cands, key=lambda c: len(Path(os.path.realpath(c)).parts)):
        real = Path(os.path.realpath(c))
        # One mount per tree: a path inside one already listed is shown by it.
        if real.is_dir() and real != Path("/") and not any(_under(real, o) for o in out):
            out.append(real)
    return tuple(sorted(out))


def _ninja_dir() -> str | None:
    """Where the pip `ninja` binary lives: torch's extension builds need it on PATH."""
    try:
        import ninja  # a dependency of cuda-agent; tiny, no side effects
    except Exception:
        return None
    pkg = Path(ninja.__file__).parent
    # Versions differ in where the binary goes; `pip --target DIR` puts it in DIR/bin.
    for d in (Path(getattr(ninja, "BIN_DIR", "") or pkg), pkg / "data" / "bin", pkg.parent / "bin"):
        if (d / "ninja").is_file():
            return str(d)
    return None


def sandbox_path_var(env: dict[str, str] | None = None, visible: "Callable[[Path], bool] | None" = None) -> str:
    """PATH inside: this Python's bin dir, CUDA, ninja, the host's PATH entries the sandbox can
    see (`visible`), then the system directories."""
    env = dict(os.environ) if env is None else env
    parts = [str(Path(sys.executable).parent)]
    for name in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(name):
            parts.append(str(Path(env[name]) / "bin"))
    if Path("/usr/local/cuda/bin").is_dir():
        parts.append("/usr/local/cuda/bin")
    ninja_dir = _ninja_dir()
    if ninja_dir:
        parts.append(ninja_dir)
    if visible is not None:
        for entry in env.get("PATH", "").split(":"):
            if entry.startswith("/") and Path(entry).is_dir() and visible(Path(os.path.realpath(entry))):
                parts.append(entry)
    parts.append(_SYSTEM_PATH)
    seen: list[str] = []
    for p in ":".join(parts).split(":"):
        if p and p not in seen:
            seen.append(p)
    return ":".join(seen)


def sandbox_env(env: dict[str, str] | None = None, visible: "Callable[[Path], bool] | None" = None) -> dict[str, str]:
    """The whole environment a sandboxed command sees: built, never inherited."""
    env = dict(os.environ) if env is None else env
    out = {
        "PATH": sandbox_path_var(env, visible),
        "HOME": SANDBOX_HOME,
        "TMPDIR": "/tmp",
        "TERM": "dumb",
        "LANG": "C.UTF-8",
        "TORCH_EXTENSIONS_DIR": "/tmp/torch_extensions",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
    }
    for name in ENV_PASSTHROUGH:
        if env.get(name) and not _SECRET_NAME.search(name):
            out[name] = env[name]
    return out


def gpu_devices() -> list[str]:
    """NVIDIA and DRI device nodes present on this machine."""
    found: list[str] = []
    dev = Path("/dev")
    try:
        names = sorted(os.listdir(dev))
    except OSError:
        return found
    for name in names:
        if name.startswith("nvidia") or name == "dri":
            found.append(str(dev / name))
    return found


def _under(path: Path, parent: Path) -> bool:
    return path == parent or parent in path.parents


def _mkdirs(path: Path, created: set[Path], tmpfs_roots: list[Path]) -> list[str]:
    """--dir for each missing ancestor of `path` inside a tmpfs we made, world-traversable."""
    args: list[str] = []
    for anc in reversed(path.parents):
        if anc in created:
            continue
        if any(anc != t and _under(anc, t) for t in tmpfs_roots):
            args += ["--perms", "0755", "--dir", str(anc)]
            created.add(anc)
    return args


def _clamp(value: int, which: int) -> int:
    """A limit no higher than the current hard limit: raising it would fail for non-root."""
    import resource

    hard = resource.getrlimit(which)[1]
    return value if hard == resource.RLIM_INFINITY else min(value, hard)


def _limit_prefix(limits: Limits) -> str:
    import resource

    # bash's ulimit sets soft and hard together, so the command cannot raise them again.
    # -f counts 1024-byte blocks, -d kilobytes.
    nproc = _clamp(limits.nproc, resource.RLIMIT_NPROC)
    fsize = _clamp(limits.file_size, resource.RLIMIT_FSIZE) // 1024
    data = _clamp(limits.data, resource.RLIMIT_DATA) // 1024
    nofile = _clamp(limits.nofile, resource.RLIMIT_NOFILE)
    return f"ulimit -u {nproc} -f {max(1, fsize)} -d {max(1, data)} -n {nofile} || exit 125\n"


@dataclass(frozen=True)
class SandboxStatus:
    """What the availability probe found."""

    available: bool
    detail: str
    bwrap: str | None = None
    setpriv: str | None = None
    can_drop_uid: bool = False  # namespaces can be made as real root and the uid dropped inside
    tmpfs_size: bool = False  # bwrap takes --size for tmpfs mounts (0.7 and later)


class Sandbox:
    """Runs shell commands under a policy; `enabled=False` is the explicit unsafe mode."""

    def __init__(
        self,
        policy: SandboxPolicy,
        status: SandboxStatus | None = None,
        enabled: bool = True,
        env: dict[str, str] | None = None,
    ) -> None:
        self.env_source = dict(os.environ) if env is None else env
        self.status = status if status is not None else probe()
        self.enabled = enabled and self.status.available
        if enabled and not self.status.available:
            raise EnvironmentMissing(f"bubblewrap sandbox unavailable: {self.status.detail}", INSTALL_HINT)
        if policy.sandbox_uid is not None and (not self.enabled or not self.status.can_drop_uid):
            # Unconfined, or no way to leave the caller's uid here (no setpriv, or a container
            # that allows only user namespaces): keep it rather than fail.
            policy = replace(policy, sandbox_uid=None, sandbox_gid=None)
        self.policy = policy
        # What the host looks like does not change during a session: computed once.
        self._hidden = sorted(set(default_hidden(self.env_source)) | {Path(os.path.realpath(x)) for x in policy.hidden})
        self._shown = sorted(
            set(toolchain_paths(self.env_source)) | {Path(os.path.realpath(x)) for x in policy.exposed}
        )
        # Only the nodes of the GPUs CUDA_VISIBLE_DEVICES names (a bench slot's one GPU), and the
        # shared ones: a task's shell cannot open another task's GPU.
        self._gpu, inner_visible = nodes_for(gpu_devices(), self.env_source) if policy.gpu else ([], None)
        self._env = sandbox_env(self.env_source, self.visible)
        if inner_visible is not None:
            self._env["CUDA_VISIBLE_DEVICES"] = inner_visible

    def visible(self, path: Path) -> bool:
        """Whether a host path shows inside: not under a hidden place, or shown again."""
        hidden = [*self._hidden, Path("/tmp")]
        return (
            not any(_under(path, h) for h in hidden)
            or any(_under(path, s) for s in self._shown)
            or _under(path, self.policy.root)
        )

    @property
    def banner(self) -> str | None:
        """A line every UI shows while commands run unconfined; None when sandboxed."""
        return None if self.enabled else UNSAFE_BANNER

    def prepare(self) -> None:
        """Create the scratch dir and hand writable entries to the sandbox uid if it differs."""
        p = self.policy
        p.scratch_dir.mkdir(parents=True, exist_ok=True)
        owner = p.owner() if self.enabled else None
        if owner is None:
            return
        # The sandbox uid must be able to read the workspace even if it was made under umask
        # 077. Only root drops the uid, and root's session store sits in its own 0700 home.
        for dirpath, dirnames, filenames in os.walk(p.root):
            for n in [dirpath, *(os.path.join(dirpath, f) for f in filenames)]:
                st = os.lstat(n)
                if not stat.S_ISLNK(st.st_mode):
                    extra = 0o005 if stat.S_ISDIR(st.st_mode) else 0o004
                    if st.st_mode & extra != extra:
                        os.chmod(n, stat.S_IMODE(st.st_mode) | extra)
        for entry in p.writable:
            target = p.root / entry
            if not target.exists() or target.is_symlink():
                continue
            os.chown(target, *owner)
            if target.is_dir():
                for dirpath, dirnames, filenames in os.walk(target):
                    for n in dirnames + filenames:
                        os.chown(os.path.join(dirpath, n), *owner, follow_symlinks=False)

    def env(self) -> dict[str, str]:
        return dict(self._env)

    def argv(self, command: str, cwd: Path | None = None) -> list[str]:
        """The full argv that runs `command` with bash under this policy."""
        p = self.policy
        cwd = cwd or p.root
        shell = ["/bin/bash", "--noprofile", "--norc", "-c", _limit_prefix(p.limits) + command]
        if not self.enabled:
            return shell
        assert self.status.bwrap is not None
        args: list[str] = [self.status.bwrap, "--ro-bind", "/", "/", "--dev", "/dev"]
        for d in self._gpu:
            args += ["--dev-bind", d, d]
        # tmpfs lives in RAM: bound in size where bwrap can, so filling /tmp cannot eat it all.
        tmp_size = ["--size", str(p.limits.tmp_size)] if self.status.tmpfs_size else []
        small = ["--size", str(1 << 20)] if self.status.tmpfs_size else []
        args += [
            "--proc",
            "/proc",
            "--perms",
            "1777",
            *tmp_size,
            "--tmpfs",
            "/tmp",
            "--perms",
            "1777",
            *tmp_size,
            "--tmpfs",
            "/dev/shm",
        ]
        tmpfs_roots = [Path("/tmp")]
        for h in self._hidden:
            if not h.is_dir() or any(_under(h, t) for t in tmpfs_roots):
                continue
            args += [*small, "--tmpfs", str(h)]
            tmpfs_roots.append(h)
        created: set[Path] = set()
        for t in self._shown:
            if any(_under(t, h) for h in tmpfs_roots) and t.is_dir():
                args += _mkdirs(t, created, tmpfs_roots)
                args += ["--ro-bind", str(t), str(t)]
        root = p.root
        args += _mkdirs(root, created, tmpfs_roots)
        args += ["--ro-bind", str(root), str(root)]
        for entry in p.writable:
            target = root / entry
            if target.exists() and not target.is_symlink():
                args += ["--bind", str(target), str(target)]
        for entry in (*p.locked, *p.protected):
            target = root / entry
            if target.exists() and not target.is_symlink():
                args += ["--ro-bind", str(target), str(target)]
        args += ["--perms", "1777", "--dir", SANDBOX_HOME]
        drop = p.owner()
        if drop is not None:
            # Namespaces made with real root's privileges; the uid drop happens inside.
            args += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        else:
            args += ["--unshare-all", "--cap-drop", "ALL"]
        args += ["--die-with-parent", "--new-session", "--clearenv"]
        for k, v in self.env().items():
            args += ["--setenv", k, v]
        args += ["--chdir", str(cwd)]
        if drop is not None:
            assert self.status.setpriv is not None
            args += [
                self.status.setpriv,
                f"--reuid={drop[0]}",
                f"--regid={drop[1]}",
                "--clear-groups",
                "--nnp",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--",
            ]
        return args + shell

    def popen_env(self) -> dict[str, str]:
        """Environment of the launched process itself (bwrap, or bash in unsafe mode)."""
        return self.env()

    def describe(self, command: str) -> str:
        """The argv as one shell-quoted line, for logs and bug reports."""
        return shlex.join(self.argv(command))


def _try(argv: list[str], env: dict[str, str]) -> str | None:
    """None when the command succeeds, else why it did not."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"failed to start: {exc}"
    if proc.returncode != 0:
        return (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1][:200]
    return None


def _supports_size(bwrap: str) -> bool:
    try:
        out = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=30, env={"PATH": _SYSTEM_PATH})
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--size" in out.stdout + out.stderr


@functools.lru_cache(maxsize=1)
def probe() -> SandboxStatus:
    """Whether bwrap exists AND can run the sandbox's real command line, tried for real.

    The trial builds the very argv commands get, on a throwaway workspace. As root it first
    tries the uid drop (namespaces made with root's privileges, then setpriv); where a
    container forbids that, the user-namespace form alone still counts as available.
    """
    import tempfile

    bwrap = shutil.which("bwrap")
    if not bwrap:
        return SandboxStatus(False, "bwrap was not found on PATH")
    setpriv = shutil.which("setpriv")
    sized = _supports_size(bwrap)
    root = os.geteuid() == 0
    with tempfile.TemporaryDirectory(prefix="cuda-agent-probe-") as tmp:
        ws = Path(tmp) / "ws"
        (ws / "kernels").mkdir(parents=True)
        (ws / "model.py").write_text("")
        why = "no attempt"
        for drop in [True, False] if root and setpriv else [False]:
            status = SandboxStatus(True, "trial", bwrap, setpriv, can_drop_uid=drop, tmpfs_size=sized)
            uid = NOBODY if drop else None
            policy = SandboxPolicy(
                root=Path(os.path.realpath(ws)), locked=("model.py",), sandbox_uid=uid, sandbox_gid=uid, gpu=False
            )
            sb = Sandbox(policy, status)
            sb.prepare()
            why = _try(sb.argv("echo probe > kernels/probe && ! echo x 2>/dev/null > model.py"), sb.popen_env()) or ""
            if not why:
                mode = (
                    f"commands run as uid {NOBODY}"
                    if drop
                    else ("as root without a uid drop: the process limit cannot bind" if root else "")
                )
                detail = f"{bwrap} creates sandboxes" + (f" ({mode})" if mode else "")
                return SandboxStatus(True, detail, bwrap, setpriv, can_drop_uid=drop, tmpfs_size=sized)
    return SandboxStatus(False, f"{bwrap} cannot create the sandbox here: {why}", bwrap, setpriv)


def require_sandbox(allow_unsafe: bool = False) -> SandboxStatus:
    """The probe's result; raises EnvironmentMissing (exit 3) unless unsafe mode was asked for.

    With `allow_unsafe` and no working bubblewrap, the returned status is unavailable and the
    caller builds `Sandbox(..., enabled=False)`, whose `banner` every screen must show.
    """
    status = probe()
    if not status.available and not allow_unsafe:
        raise EnvironmentMissing(f"bubblewrap sandbox unavailable: {status.detail}", INSTALL_HINT)
    return status


def open_sandbox(policy: SandboxPolicy, allow_unsafe: bool = False) -> Sandbox:
    """The sandbox for a session: confined when bubblewrap works, else unsafe only if allowed."""
    status = require_sandbox(allow_unsafe)
    sb = Sandbox(policy, status, enabled=status.available)
    sb.prepare()
    return sb

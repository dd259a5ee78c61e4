"""Threats 17-21 (docs/security.md) against the real bubblewrap sandbox, through the Bash tool the agent uses.

Each attack must fail inside the sandbox, and honest work (writing kernels, python with torch,
g++ and nvcc) must still succeed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

from cuda_agent_cli.actions import ActionContext, make_toolbox
from cuda_agent_cli.sandbox import Limits, Sandbox, SandboxPolicy, probe

# Skipped only where bubblewrap is not installed; installed but unusable is a failure.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed"),
]

LOCKED = ["model.py", "binding.cpp", "binding_registry.h", "SKILL.md"]


def make_ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "kernels").mkdir(parents=True)
    for name in LOCKED:
        (ws / name).write_text(f"# pristine {name}\n")
    (ws / "model_new.py").write_text("# candidate\n")
    return ws


def digests(ws: Path) -> dict[str, str]:
    return {n: hashlib.sha256((ws / n).read_bytes()).hexdigest() for n in LOCKED}


def test_bubblewrap_can_create_the_sandbox_here() -> None:
    status = probe()
    assert status.available, status.detail


@pytest.fixture
def box(tmp_path: Path):
    assert probe().available, probe().detail
    ws = make_ws(tmp_path)
    sb = Sandbox(SandboxPolicy.optimize(ws, LOCKED))
    sb.prepare()
    tb = make_toolbox(ActionContext(sb))
    yield tb
    tb.close()


def bash(tb, command: str, timeout_ms: int = 60_000):
    return tb.call("Bash", {"command": command, "timeout": timeout_ms})


def test_locked_files_survive_every_way_of_writing_them(box) -> None:
    ws = box.ctx.root
    before = digests(ws)
    attacks = {
        "direct": "echo hacked > model.py",
        "append": "echo hacked >> binding.cpp",
        "symlink": "ln -sf ../model.py kernels/m.py && echo hacked > kernels/m.py",
        "hardlink": "ln model.py kernels/m2.py && echo hacked > kernels/m2.py",
        "rename file": "mv model.py kernels/model.py",
        "rename root": f"mv {ws} {ws}.moved",
        "replace parent": "cd .. && mv ws ws_old && mkdir ws && echo hacked > ws/model.py",
        "rename kernels": "mv kernels k && ln -s . kernels",
        "chmod": "chmod 666 model.py",
        "delete": "rm -f SKILL.md",
        "truncate": "truncate -s 0 binding_registry.h",
        "python": "python -c \"open('model.py','w').write('hacked')\"",
    }
    for name, cmd in attacks.items():
        r = bash(box, cmd)
        assert r.is_error, f"{name}: the command succeeded: {r.output}"
        assert digests(ws) == before, f"{name}: a locked file changed"
    assert oct((ws / "model.py").stat().st_mode & 0o777) == oct(0o644)
    assert (ws / "kernels").is_dir() and not (ws / "kernels").is_symlink()


def test_file_tools_refuse_the_same_attacks(box) -> None:
    ws = box.ctx.root
    before = digests(ws)
    os.symlink("../model.py", ws / "kernels" / "link.py")
    for call in [
        ("Write", {"file_path": "model.py", "content": "x"}),
        ("Write", {"file_path": "kernels/link.py", "content": "x"}),
        ("Write", {"file_path": "kernels/../model.py", "content": "x"}),
        ("Edit", {"file_path": str(ws / "SKILL.md"), "old_string": "pristine", "new_string": "x"}),
        ("Write", {"file_path": "../outside.txt", "content": "x"}),
    ]:
        r = box.call(*call)
        assert r.is_error, call
    assert digests(ws) == before
    assert not (ws.parent / "outside.txt").exists()


def test_writes_outside_the_workspace_fail(box, tmp_path: Path) -> None:
    outside = Path("/var/tmp") / f"cuda-agent-test-{os.getpid()}"
    outside.mkdir(exist_ok=True)
    try:
        for cmd in [
            f"echo x > {outside}/f",
            "echo x > /etc/cuda-agent-test",
            "touch /usr/bin/cuda-agent-test",
            f"echo x > {box.ctx.root}/new_top_level.py",
        ]:
            assert bash(box, cmd).is_error, cmd
        assert not (outside / "f").exists()
        assert not Path("/etc/cuda-agent-test").exists()
        assert not (box.ctx.root / "new_top_level.py").exists()
        # /tmp inside is private: usable, and gone afterwards
        r = bash(box, "echo private > /tmp/cuda-agent-probe && cat /tmp/cuda-agent-probe")
        assert not r.is_error and "private" in r.output
        assert not Path("/tmp/cuda-agent-probe").exists()
    finally:
        shutil.rmtree(outside, ignore_errors=True)


def test_no_network_even_to_a_server_on_this_machine(box) -> None:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    port = srv.getsockname()[1]
    stop = threading.Event()

    def serve() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
                conn.sendall(b"hello\n")
                conn.close()
            except OSError:
                pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as c:  # reachable outside
            assert c.recv(6) == b"hello\n"
        r = bash(box, f"exec 3<>/dev/tcp/127.0.0.1/{port} && head -c 6 <&3", 20_000)
        assert r.is_error and "hello" not in r.output
        r = bash(box, "python -c \"import socket; socket.create_connection(('1.1.1.1', 53), timeout=3)\"", 20_000)
        assert r.is_error and "unreachable" in r.output.lower()
        r = bash(box, "ls /proc/net/dev >/dev/null && tail -n +3 /proc/net/dev | cut -d: -f1")
        assert r.output.split() == ["lo"], r.output  # a fresh namespace: loopback only
    finally:
        stop.set()
        t.join()
        srv.close()


def test_secrets_in_the_environment_and_home_are_invisible(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = Path("/var/tmp") / f"cuda-agent-home-{os.getpid()}"
    (home / ".ssh").mkdir(parents=True, exist_ok=True)
    (home / ".ssh" / "id_rsa").write_text("-----BEGIN FAKE PRIVATE KEY-----\n")
    try:
        monkeypatch.setenv("HOME", str(home))
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fake-0123456789")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-openai")
        monkeypatch.setenv("HF_TOKEN", "hf_fake")
        ws = make_ws(tmp_path)
        sb = Sandbox(SandboxPolicy.optimize(ws, LOCKED))
        sb.prepare()
        tb = make_toolbox(ActionContext(sb))
        r = bash(tb, "env; cat /proc/1/environ; cat /proc/self/environ; echo HOME=$HOME")
        for secret in ("sk-ant-fake", "sk-fake-openai", "hf_fake"):
            assert secret not in r.output
        for cmd in [f"cat {home}/.ssh/id_rsa", "cat ~/.ssh/id_rsa", "ls /root/.ssh/id_rsa"]:
            r = bash(tb, cmd)
            assert r.is_error and "FAKE PRIVATE KEY" not in r.output, cmd
        r = tb.call("Read", {"file_path": f"{home}/.ssh/id_rsa"})
        assert r.is_error and "FAKE PRIVATE KEY" not in r.output
        r = tb.call("Read", {"file_path": "/proc/self/environ"})
        assert r.is_error and "sk-ant-fake" not in r.output
        r = tb.call("Grep", {"pattern": "PRIVATE KEY", "path": str(home)})
        assert r.is_error or "id_rsa" not in r.output
        tb.close()
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _uid_process_count(uid: int) -> int:
    n = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.stat(f"/proc/{pid}").st_uid == uid:
                    n += 1
            except OSError:
                pass
    return n


def test_a_fork_bomb_hits_the_process_limit_and_leaves_nothing_behind(tmp_path: Path) -> None:
    ws = make_ws(tmp_path)
    sb = Sandbox(SandboxPolicy.optimize(ws, LOCKED, limits=Limits(nproc=48)))
    sb.prepare()
    uid = sb.policy.sandbox_uid if sb.policy.sandbox_uid is not None else os.getuid()
    baseline = _uid_process_count(uid)
    tb = make_toolbox(ActionContext(sb))
    started = time.monotonic()
    r = bash(tb, "bomb() { bomb | bomb & }; bomb; sleep 60", timeout_ms=4_000)
    assert r.is_error
    assert time.monotonic() - started < 30
    assert "Resource temporarily unavailable" in r.output or "retry" in r.output
    deadline = time.monotonic() + 10
    while _uid_process_count(uid) > baseline and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _uid_process_count(uid) <= baseline
    ok = bash(tb, "echo machine-fine")
    assert not ok.is_error and "machine-fine" in ok.output
    tb.close()


def test_a_command_cannot_outlive_its_timeout(box) -> None:
    marker = box.ctx.root / "kernels" / "late.txt"
    started = time.monotonic()
    r = bash(
        box,
        "(setsid bash -c 'sleep 2; echo alive > kernels/late.txt' &) ; nohup sleep 100 >/dev/null 2>&1 & sleep 100",
        timeout_ms=1_000,
    )
    assert r.is_error and r.data["timed_out"]
    assert time.monotonic() - started < 10
    time.sleep(3)
    assert not marker.exists()


def test_background_shell_is_killed_with_everything_it_started(box) -> None:
    marker = box.ctx.root / "kernels" / "bg.txt"
    r = box.call(
        "Bash", {"command": "echo started; sleep 2; echo later > kernels/bg.txt; sleep 100", "run_in_background": True}
    )
    sid = r.data["bash_id"]
    time.sleep(0.5)
    out = box.call("BashOutput", {"bash_id": sid})
    assert "started" in out.output and out.data["status"] == "running"
    k = box.call("KillBash", {"shell_id": sid})
    assert not k.is_error and k.data["status"] == "killed"
    time.sleep(2.5)
    assert not marker.exists()


def test_honest_work_succeeds_inside(box) -> None:
    ws = box.ctx.root
    r = bash(
        box,
        "echo '__global__ void k() {}' > kernels/k.cu && cat kernels/k.cu && "
        "echo 'class ModelNew: pass' > model_new.py && mkdir -p scratch/notes && echo n > scratch/notes/a",
    )
    assert not r.is_error, r.output
    assert (ws / "kernels" / "k.cu").read_text().startswith("__global__")
    assert (ws / "model_new.py").read_text().startswith("class ModelNew")
    r = bash(box, "python -c \"import torch; print('sum', torch.ones(4).sum().item())\"", 120_000)
    assert not r.is_error and "sum 4.0" in r.output, r.output
    (ws / "kernels" / "hello.cpp").write_text('#include <cstdio>\nint main(){std::puts("compiled-ok");}\n')
    r = bash(box, "g++ -O2 -o /tmp/hello kernels/hello.cpp && /tmp/hello", 120_000)
    assert not r.is_error and "compiled-ok" in r.output, r.output
    # the Write tool's files stay editable from the shell
    box.call("Write", {"file_path": "kernels/w.cu", "content": "// a\n"})
    r = bash(box, "echo '// b' >> kernels/w.cu && cat kernels/w.cu")
    assert not r.is_error and "// b" in r.output, r.output


@pytest.mark.skipif(
    shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists(), reason="nvcc not installed"
)
def test_nvcc_compiles_inside(box) -> None:
    (box.ctx.root / "kernels" / "add.cu").write_text(
        "__global__ void add(float* a, const float* b, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] += b[i]; }\n"
    )
    r = bash(box, "nvcc -c kernels/add.cu -o /tmp/add.o && ls -l /tmp/add.o", 300_000)
    assert not r.is_error, r.output
    assert "add.o" in r.output


def test_repository_mode_protects_git(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text("[core]\n")
    (repo / "src.py").write_text("x = 1\n")
    sb = Sandbox(SandboxPolicy.repository(repo))
    sb.prepare()
    tb = make_toolbox(ActionContext(sb))
    assert not bash(tb, "echo 'x = 2' > src.py").is_error
    assert (repo / "src.py").read_text() == "x = 2\n"
    for cmd in ["echo evil >> .git/config", "mv .git g", "rm -rf .git", "ln -s /tmp .git/hooks"]:
        assert bash(tb, cmd).is_error, cmd
    assert (repo / ".git" / "config").read_text() == "[core]\n"
    tb.close()


def test_filling_the_disk_or_memory_backed_tmp_is_bounded(tmp_path: Path) -> None:
    ws = make_ws(tmp_path)
    sb = Sandbox(SandboxPolicy.optimize(ws, LOCKED, limits=Limits(file_size=1 << 20, tmp_size=8 << 20)))
    sb.prepare()
    tb = make_toolbox(ActionContext(sb))
    big = bash(tb, "head -c 3000000 /dev/zero > kernels/big.bin")
    assert big.is_error
    assert (ws / "kernels" / "big.bin").stat().st_size <= 1 << 20
    if sb.status.tmpfs_size:
        full = bash(tb, "for i in 1 2 3 4 5 6 7 8 9 10; do head -c 1000000 /dev/zero > /tmp/f$i || exit 1; done")
        assert full.is_error and "No space left" in full.output
    assert not bash(tb, "head -c 500000 /dev/zero > kernels/ok.bin").is_error
    tb.close()


def test_a_workspace_made_under_a_strict_umask_is_still_usable(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        ws = make_ws(tmp_path)
        (ws / "kernels" / "mine.cu").write_text("// mine\n")
    finally:
        os.umask(old)
    sb = Sandbox(SandboxPolicy.optimize(ws, LOCKED))
    sb.prepare()
    tb = make_toolbox(ActionContext(sb))
    r = bash(tb, "cat model.py kernels/mine.cu && echo more >> kernels/mine.cu")
    assert not r.is_error and "pristine model.py" in r.output, r.output
    assert (ws / "kernels" / "mine.cu").read_text() == "// mine\nmore\n"
    tb.close()


def test_grep_with_ripgrep_runs_inside_the_sandbox(box) -> None:
    if shutil.which("rg") is None:
        pytest.skip("ripgrep is not installed")
    (box.ctx.root / "kernels" / "k.cu").write_text("__global__ void k() {}\n")
    r = box.call("Grep", {"pattern": "__global__", "output_mode": "content"})
    assert not r.is_error and r.data["engine"] == "ripgrep"
    assert r.output == "kernels/k.cu:1:__global__ void k() {}"


# Counts every task (what RLIMIT_NPROC counts) in the sandbox's PID namespace for 3 seconds with
# shell builtins only, so counting forks nothing while the bomb holds every slot. The shell lowers
# its own priority first: the bomb and its children inherit it, so the shared machine stays usable.
BOMB_AND_COUNT = (
    "renice -n 19 -p $$ >/dev/null 2>&1; mkfifo /tmp/tick; exec 9<>/tmp/tick; "
    "bomb() { bomb | bomb & }; bomb 2>/dev/null; "
    "max=0; end=$((SECONDS + 3)); "
    "while [ $SECONDS -lt $end ]; do n=0; for t in /proc/[0-9]*/task/[0-9]*; do n=$((n + 1)); done; "
    "[ $n -gt $max ] && max=$n; read -t 0.05 -u 9; done; echo PEAK=$max"
)


def test_a_fork_bomb_is_held_to_the_cap_and_the_machine_survives(tmp_path: Path) -> None:
    cap = 64
    ws = make_ws(tmp_path)
    sb = Sandbox(SandboxPolicy.optimize(ws, LOCKED, limits=Limits(nproc=cap)))
    sb.prepare()
    uid = sb.policy.sandbox_uid if sb.policy.sandbox_uid is not None else os.getuid()
    baseline = _uid_process_count(uid)
    tb = make_toolbox(ActionContext(sb))
    started = time.monotonic()
    r = bash(tb, BOMB_AND_COUNT, timeout_ms=20_000)
    assert time.monotonic() - started < 30
    peaks = [int(line[5:]) for line in r.output.splitlines() if line.startswith("PEAK=")]
    assert peaks, r.output
    # Never past the cap: the counting shell and bwrap's own init are the only tasks beyond the
    # uid's. After the uid drop the cap is shared with every task of that uid on the host, so the
    # bomb is only expected to fill slots when few were taken before it started.
    assert peaks[0] <= cap + 2, r.output
    if baseline + 16 < cap:
        assert peaks[0] > 8, r.output
    deadline = time.monotonic() + 10
    while _uid_process_count(uid) > baseline and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _uid_process_count(uid) <= baseline
    ok = bash(tb, "echo machine-fine")
    assert not ok.is_error and "machine-fine" in ok.output
    tb.close()


def test_the_default_cap_is_a_few_hundred_and_binds_inside(box) -> None:
    assert 256 <= Limits().nproc <= 512
    r = bash(box, "ulimit -u")
    assert not r.is_error and r.output.strip().splitlines()[-1] == str(min(Limits().nproc, _hard_nproc())), r.output


def _hard_nproc() -> int:
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    return 1 << 62 if hard == resource.RLIM_INFINITY else hard

"""The bubblewrap policy as an argv, the probe's refusal, and the unsafe mode (no bwrap run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent_cli import sandbox
from cuda_agent_cli.errors import EnvironmentMissing
from cuda_agent_cli.sandbox import Limits, Sandbox, SandboxPolicy, SandboxStatus, sandbox_env

OK = SandboxStatus(True, "test", "/usr/bin/bwrap", "/usr/bin/setpriv", can_drop_uid=True)
MISSING = SandboxStatus(False, "bwrap was not found on PATH")


def make_ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "kernels").mkdir(parents=True)
    for name in ("model.py", "binding.cpp", "binding_registry.h", "SKILL.md", "model_new.py"):
        (ws / name).write_text(f"# {name}\n")
    return ws


def _pairs(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def test_locked_files_are_bound_read_only_after_the_writable_entries(tmp_path: Path) -> None:
    ws = make_ws(tmp_path)
    pol = SandboxPolicy.optimize(
        ws, ["model.py", "binding.cpp", "binding_registry.h", "SKILL.md"], sandbox_uid=None, sandbox_gid=None
    )
    argv = Sandbox(pol, OK).argv("true")
    root = str(pol.root)
    ro = _pairs(argv, "--ro-bind")
    rw = _pairs(argv, "--bind")
    assert root in ro
    assert f"{root}/kernels" in rw and f"{root}/model_new.py" in rw
    for locked in ("model.py", "binding.cpp", "binding_registry.h", "SKILL.md"):
        assert f"{root}/{locked}" in ro
    # Order matters in bwrap: the last mount on a path wins.
    last_rw = max(i for i, a in enumerate(argv) if a == "--bind")
    first_locked = argv.index(f"{root}/model.py") - 1
    assert first_locked > last_rw
    assert "--unshare-all" in argv and "--die-with-parent" in argv and "--clearenv" in argv


def test_root_drops_to_an_unprivileged_uid_inside(tmp_path: Path) -> None:
    pol = SandboxPolicy.optimize(make_ws(tmp_path), [], sandbox_uid=65534, sandbox_gid=65534)
    argv = Sandbox(pol, OK).argv("true")
    assert "--unshare-net" in argv and "--unshare-pid" in argv and "--unshare-all" not in argv
    sp = argv.index("/usr/bin/setpriv")
    assert argv[sp + 1 : sp + 3] == ["--reuid=65534", "--regid=65534"]
    assert "--nnp" in argv[sp:]


def test_without_a_way_to_drop_the_uid_the_callers_uid_is_kept(tmp_path: Path) -> None:
    status = SandboxStatus(True, "test", "/usr/bin/bwrap", None, can_drop_uid=False)
    pol = SandboxPolicy.optimize(make_ws(tmp_path), [], sandbox_uid=65534, sandbox_gid=65534)
    sb = Sandbox(pol, status)
    assert sb.policy.sandbox_uid is None
    assert "--unshare-all" in sb.argv("true")


def test_home_and_secret_places_are_hidden_and_the_workspace_is_shown_again(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    ws = make_ws(tmp_path)
    sb = Sandbox(SandboxPolicy.optimize(ws, []), OK, env={"HOME": str(home), "PATH": "/usr/bin"})
    argv = sb.argv("true")
    tmpfs = _pairs(argv, "--tmpfs")
    assert "/tmp" in tmpfs and "/root" in tmpfs
    # the workspace is bound after /tmp is emptied, so it stays visible
    assert argv.index(str(sb.policy.root)) > argv.index("/tmp")


def test_environment_is_rebuilt_from_an_allowlist() -> None:
    env = sandbox_env(
        {
            "PATH": "/usr/bin",
            "ANTHROPIC_API_KEY": "sk-ant-secret",
            "GITHUB_TOKEN": "ghp_x",
            "CUDA_VISIBLE_DEVICES": "0",
            "HOME": "/root",
            "AWS_SECRET_ACCESS_KEY": "x",
            "LD_PRELOAD": "/evil.so",
            "PYTHONPATH": "/evil",
        }
    )
    assert "ANTHROPIC_API_KEY" not in env and "GITHUB_TOKEN" not in env
    assert "AWS_SECRET_ACCESS_KEY" not in env and "LD_PRELOAD" not in env and "PYTHONPATH" not in env
    assert env["CUDA_VISIBLE_DEVICES"] == "0"
    assert env["HOME"] == sandbox.SANDBOX_HOME
    assert env["TORCH_EXTENSIONS_DIR"].startswith("/tmp/")


def test_limits_are_applied_by_the_shell_before_the_command(tmp_path: Path) -> None:
    pol = SandboxPolicy.optimize(make_ws(tmp_path), [], limits=Limits(nproc=77, file_size=1 << 20))
    argv = Sandbox(pol, OK).argv("echo hi")
    script = argv[-1]
    assert script.startswith("ulimit -u 77 -f 1024 ")
    assert script.endswith("echo hi")


def test_the_default_process_cap_holds_a_fork_bomb_to_a_few_hundred(tmp_path: Path) -> None:
    import resource

    assert Limits().nproc == 512
    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    expected = 512 if hard == resource.RLIM_INFINITY else min(512, hard)
    script = Sandbox(SandboxPolicy.optimize(make_ws(tmp_path), []), OK).argv("true")[-1]
    assert script.startswith(f"ulimit -u {expected} ")


def test_missing_bubblewrap_refuses_with_exit_3_and_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "probe", lambda: MISSING)
    with pytest.raises(EnvironmentMissing) as info:
        sandbox.require_sandbox(allow_unsafe=False)
    assert info.value.exit_code == 3
    assert "apt-get install bubblewrap" in info.value.one_line()
    assert "dnf install bubblewrap" in info.value.one_line()


def test_unsafe_flag_runs_unconfined_and_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sandbox, "probe", lambda: MISSING)
    sb = sandbox.open_sandbox(SandboxPolicy.optimize(make_ws(tmp_path), []), allow_unsafe=True)
    assert not sb.enabled
    assert sb.banner is not None and "UNSAFE" in sb.banner
    assert sb.argv("true")[0] == "/bin/bash"
    assert sb.policy.scratch_dir.is_dir()


def test_a_working_sandbox_has_no_banner(tmp_path: Path) -> None:
    sb = Sandbox(SandboxPolicy.optimize(make_ws(tmp_path), []), OK)
    assert sb.enabled and sb.banner is None


def test_asking_for_a_sandbox_that_is_missing_raises(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentMissing):
        Sandbox(SandboxPolicy.optimize(make_ws(tmp_path), []), MISSING, enabled=True)


def test_repository_policy_keeps_git_read_only(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    pol = SandboxPolicy.repository(repo)
    argv = Sandbox(pol, OK).argv("true")
    root = str(pol.root)
    assert root in _pairs(argv, "--bind")
    assert f"{root}/.git" in _pairs(argv, "--ro-bind")


def test_gpu_device_nodes_are_dev_bound(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(sandbox, "gpu_devices", lambda: ["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"])
    argv = Sandbox(SandboxPolicy.optimize(make_ws(tmp_path), []), OK).argv("true")
    assert _pairs(argv, "--dev-bind") == ["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"]
    # after the minimal /dev, or they would be covered by it
    assert argv.index("--dev-bind") > argv.index("--dev")

"""The CLI a user meets first: --version, --help, doctor, and one-line errors with exit codes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from cuda_agent_cli import __version__


def run_cli(
    *args: str, env: dict[str, str] | None = None, drop: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k not in drop}
    return subprocess.run(
        [sys.executable, "-m", "cuda_agent_cli", *args],
        capture_output=True,
        text=True,
        env={**full, **(env or {})},
        timeout=120,
    )


def test_version() -> None:
    out = run_cli("--version")
    assert out.returncode == 0
    assert out.stdout.strip() == f"cuda-agent {__version__}"


def test_help_lists_doctor() -> None:
    out = run_cli("--help")
    assert out.returncode == 0
    assert "doctor" in out.stdout


def test_unknown_command_is_a_usage_error() -> None:
    out = run_cli("frobnicate")
    assert out.returncode == 2
    assert "No such command" in out.stderr
    assert "Traceback" not in out.stderr


def test_bad_device_gets_one_line_and_exit_2() -> None:
    out = run_cli("doctor", "--device", "tpu")
    assert out.returncode == 2
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert lines == ["error: command line: `device` must be one of cuda, cpu, got 'tpu' — fix or remove that setting"]


def test_doctor_cuda_without_gpu_exits_3_with_fix_hints() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    out = run_cli("doctor", "--device", "cuda")
    assert out.returncode == 3
    assert "FAIL gpu" in out.stdout
    assert "no CUDA GPU visible" in out.stdout and "use --device cpu" in out.stdout
    assert "not ready for --device cuda" in out.stdout


@pytest.mark.skipif(not (shutil.which("c++") or shutil.which("g++")), reason="needs a C++ compiler")
def test_doctor_cpu_is_ready_with_compiler_and_ninja() -> None:
    out = run_cli("doctor", "--device", "cpu")
    assert out.returncode == 0, out.stdout
    for name in ("python", "torch", "ninja", "c++ compiler", "bubblewrap", "landlock", "model"):
        assert name in out.stdout
    assert "ready for --device cpu" in out.stdout
    # Whether candidates' file writes can be confined is reported either way, never a blocker.
    landlock_line = next(line for line in out.stdout.splitlines() if "landlock" in line)
    assert "confined" in landlock_line


def test_doctor_reports_missing_api_key_for_configured_model() -> None:
    env = {"CUDA_AGENT_MODEL": "anthropic/claude-sonnet-4-5"}
    out = run_cli("doctor", "--device", "cpu", env=env, drop=("ANTHROPIC_API_KEY",))
    assert "anthropic/claude-sonnet-4-5 (from environment)" in out.stdout
    assert "missing ANTHROPIC_API_KEY" in out.stdout
    assert "export ANTHROPIC_API_KEY=" in out.stdout


def test_doctor_reports_replay_model(tmp_path) -> None:
    replay = tmp_path / "s.jsonl"
    replay.write_text("")
    out = run_cli("doctor", "--device", "cpu", "--model", f"replay:{replay}")
    assert f"replay:{replay} (replay, from flag)" in out.stdout


def test_doctor_needs_no_api_key_for_a_local_server() -> None:
    out = run_cli(
        "doctor",
        "--device",
        "cpu",
        "--model",
        "openai/llama",
        "--api-base",
        "http://127.0.0.1:9/v1",
        drop=("OPENAI_API_KEY",),
    )
    assert "not needed for the server at http://127.0.0.1:9/v1" in out.stdout


def _model_lines(stdout: str) -> dict[str, str]:
    """doctor's model lines by name: "ok  " / "FAIL" / "warn" and the rest of the line."""
    out = {}
    for line in stdout.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[0] in ("ok", "FAIL", "warn"):
            for name in ("model", "api key", "endpoint"):
                if parts[1].startswith(name + " "):
                    out[name] = f"{parts[0]} {parts[1][len(name) :].strip()}"
    return out


def test_doctor_fails_for_a_missing_replay_file(tmp_path) -> None:
    missing = tmp_path / "gone.jsonl"
    out = run_cli("doctor", "--device", "cpu", "--model", f"replay:{missing}")
    assert out.returncode == 3, out.stdout
    assert _model_lines(out.stdout)["model"].startswith(f"FAIL replay:{missing} (replay, from flag): replay file")
    assert "not ready for --device cpu: fix" in out.stdout and "model" in out.stdout.splitlines()[-1]


def test_doctor_fails_for_a_missing_api_key() -> None:
    out = run_cli("doctor", "--device", "cpu", "--model", "anthropic/claude-sonnet-4-5", drop=("ANTHROPIC_API_KEY",))
    assert out.returncode == 3, out.stdout
    assert _model_lines(out.stdout)["api key"] == "FAIL missing ANTHROPIC_API_KEY  -> export ANTHROPIC_API_KEY=..."
    assert "endpoint" not in _model_lines(out.stdout)  # nothing is sent without a key
    assert out.stdout.splitlines()[-1].endswith("fix api key")


@pytest.mark.integration
def test_doctor_probes_the_endpoint_and_the_key() -> None:
    from cuda_agent_cli.model.fake_server import FakeOpenAIServer, reply_error, reply_raw, reply_text

    page = reply_raw("<html><body>Welcome to nginx!</body></html>", "text/html")
    with FakeOpenAIServer([reply_text("ready"), reply_error(401, "invalid api key"), page, page]) as srv:
        args = ("doctor", "--device", "cpu", "--model", "openai/fake", "--api-base", srv.api_base)
        good, bad_key, html = run_cli(*args), run_cli(*args), run_cli(*args)
        api_base = srv.api_base
        assert srv.requests[0]["messages"][0]["role"] == "user" and srv.requests[0]["stream"] is True
    lines = _model_lines(good.stdout)
    assert lines["endpoint"] == f"ok {api_base} answered in " + lines["endpoint"].split(" answered in ", 1)[1]
    assert lines["endpoint"].endswith(": 'ready'") and "endpoint" not in good.stdout.splitlines()[-1]
    assert bad_key.returncode == 3 and _model_lines(bad_key.stdout)["api key"].startswith(
        "FAIL openai/fake: the provider rejected the credentials"
    )
    assert html.returncode == 3
    endpoint = _model_lines(html.stdout)["endpoint"]
    assert endpoint.startswith(f"FAIL openai/fake: the server at {api_base} answered HTTP 200 with text/html")
    assert "Welcome to nginx!" in endpoint and html.stdout.splitlines()[-1].endswith("fix endpoint")


@pytest.mark.integration
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full, where every write finds the disk full")
def test_a_full_disk_where_a_command_writes_is_one_line_and_exit_3(tmp_path) -> None:
    (tmp_path / ".git").mkdir()
    out = subprocess.run(
        [sys.executable, "-m", "cuda_agent_cli", "check", "--fast", "--junit", "/dev/full"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert out.returncode == 3, out.stderr
    assert out.stderr.splitlines() == [
        "error: cannot write: no space left on the device — free some space there and run the command again "
        "(a stopped session continues with --resume ID)"
    ]

"""optimize's bad inputs: each one clear line and the documented exit code, never a traceback."""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cuda_agent_cli.demo import replay_path
from cuda_agent_cli.harness_result import HarnessResult
from cuda_agent_cli.run.optimize import status_of

MODULE = textwrap.dedent("""\
    import torch


    class Block(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x)


    class Needy(torch.nn.Module):
        def __init__(self, path):
            super().__init__()
            open(path).read()

        def forward(self, x):
            return x
    """)


@pytest.fixture
def project(tmp_path: Path):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "blocks.py").write_text(MODULE)
    env = {
        k: v
        for k, v in os.environ.items()
        if (not k.startswith("CUDA_AGENT_") or k == "CUDA_AGENT_PCH_DIR") and not k.endswith("_API_KEY")
    }
    env.update(XDG_DATA_HOME=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path / "config"))

    def cli(*args: str, wrap: list[str] = ()) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*wrap, sys.executable, "-m", "cuda_agent_cli", *args],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    return root, cli


REPLAY = ["--model", f"replay:{replay_path('cpu')}"]


@pytest.mark.parametrize(
    "args, code, words",
    [
        (["missing.py::Block", *REPLAY, "--inputs", "x=float32[4]"], 2, "missing.py: no such file"),
        (
            ["blocks.py::Nope", *REPLAY, "--inputs", "x=float32[4]"],
            2,
            "has no class `Nope` — classes there: Block, Needy",
        ),
        (["blocks.py::Needy", *REPLAY, "--inputs", "x=float32[4]"], 2, "Needy fails to construct: TypeError"),
        (["blocks.py::Block", *REPLAY], 2, "no way to make inputs for Block"),
        (["blocks.py::Block", *REPLAY, "--inputs", "x=float99[4]"], 2, "unknown dtype `float99`"),
        (["blocks.py::Block", "--inputs", "x=float32[4]"], 3, "no model configured"),
        (["blocks.py::Block", "--model", "notaprovider/some-model", "--inputs", "x=float32[4]"], 2, "unknown model"),
        (
            ["blocks.py::Block", "--model", "anthropic/claude-sonnet-4-5", "--inputs", "x=float32[4]"],
            3,
            "ANTHROPIC_API_KEY is not set",
        ),
        (
            ["blocks.py::Block", *REPLAY, "--inputs", "x=float32[4]", "--yes", "--batch"],
            2,
            "is not inside a git repository",
        ),
        (["blocks.py::Block", *REPLAY, "--yes", "--no-apply"], 2, "--yes and --no-apply contradict"),
        ([*REPLAY], 2, "optimize needs a TARGET"),
        (
            ["blocks.py::Block", "--model", "replay:/nonexistent.jsonl", "--inputs", "x=float32[4]"],
            2,
            "replay file /nonexistent.jsonl does not exist",
        ),
        # Inputs on one device, the session on another: refused, not silently moved.
        (
            ["blocks.py::Block", *REPLAY, "--inputs", "x=float32[4] cuda", "--device", "cpu"],
            2,
            "--inputs puts x on cuda, but --device cpu runs the session on cpu — drop `cuda` from --inputs",
        ),
        (
            ["blocks.py::Block", *REPLAY, "--inputs", "x=float32[4] cpu", "--device", "cuda"],
            2,
            "--inputs puts x on cpu, but --device cuda runs the session on cuda",
        ),
        (
            ["blocks.py::Block", *REPLAY, "--inputs", "x=float32[4] cpu, y=float32[4] cuda:1"],
            2,
            "--inputs puts x on cpu but y on cuda; a session runs on one device",
        ),
    ],
)
def test_bad_input_gets_one_line_and_its_exit_code(project, args, code, words):
    root, cli = project
    proc = cli("optimize", *args)
    assert proc.returncode == code, proc.stderr
    # progress lines ("importing ...") may precede it; the error is one line
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, proc.stderr
    assert words in lines[0]
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert sorted(p.name for p in root.iterdir()) == ["blocks.py"]  # nothing written into the project


def test_json_mode_reports_errors_as_its_one_object(project):
    import json

    _, cli = project
    proc = cli("optimize", "missing.py::Block", *REPLAY, "--json")
    assert proc.returncode == 2
    out = json.loads(proc.stdout)
    assert out["status"] == "error" and out["exit_code"] == 2 and "no such file" in out["error"]
    from readme_keys import documented_error_keys

    assert sorted(out) == sorted(documented_error_keys())


@pytest.mark.integration
def test_a_server_answering_html_ends_the_session_with_exit_3_not_done(project):
    from cuda_agent_cli.model.fake_server import FakeOpenAIServer, reply_raw

    _, cli = project
    page = "<html><body><h1>502 Bad Gateway</h1></body></html>"
    with FakeOpenAIServer([reply_raw(page, "text/html")] * 4) as srv:
        api = ["--model", "openai/fake", "--api-base", srv.api_base]
        proc = cli("optimize", "blocks.py::Block", *api, "--inputs", "x=float32[4]", "--device", "cpu", "--no-apply")
    assert proc.returncode == 3, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1 and "answered HTTP 200 with text/html, not a chat completion: <html>" in lines[0]
    assert "stopped: done" not in proc.stderr + proc.stdout and "Traceback" not in proc.stderr


def test_a_configured_device_that_disagrees_with_the_inputs_is_named_with_its_origin(tmp_path: Path):
    from cuda_agent_cli.config import load_config
    from cuda_agent_cli.errors import InputSpecError
    from cuda_agent_cli.run.checks import check_input_devices
    from cuda_agent_cli.task.inputs import parse_inputs_spec

    cfg = load_config({}, cwd=tmp_path, env={"HOME": str(tmp_path), "CUDA_AGENT_DEVICE": "cpu"})
    with pytest.raises(InputSpecError) as exc:
        check_input_devices(parse_inputs_spec("a=int64[2], x=float16[8] cuda"), cfg, "--inputs")
    assert exc.value.message == "--inputs puts x on cuda, but device cpu from CUDA_AGENT_DEVICE runs the session on cpu"
    check_input_devices(parse_inputs_spec("x=float16[8] cpu"), cfg, "--inputs")  # agrees
    check_input_devices(parse_inputs_spec("x=float16[8]"), cfg, "--inputs")  # names no device
    cfg = load_config({}, cwd=tmp_path, env={"HOME": str(tmp_path)})
    check_input_devices(parse_inputs_spec("x=float16[8] cuda"), cfg, "--inputs")  # the inputs decide


def test_status_follows_the_reward():
    def result(correct: bool, reward: int | None) -> HarnessResult:
        return HarnessResult(compiled=True, correct=correct, reward=reward, device="cpu", policy="strict")

    assert status_of(None) == "failed"
    assert status_of(result(False, -1)) == "failed"
    assert status_of(result(True, None)) == "correct"
    assert status_of(result(True, 1)) == "correct"
    assert status_of(result(True, 2)) == "improved"
    assert status_of(result(True, 3)) == "improved"


def test_a_kernel_never_timed_is_not_called_not_faster(tmp_path: Path):
    from types import SimpleNamespace

    from cuda_agent_cli.cli import render
    from cuda_agent_cli.cli.optimize import ReviewOptions, _review
    from cuda_agent_cli.run.optimize import OptimizeOutcome

    def outcome(timings: dict | None, reward: int | None) -> OptimizeOutcome:
        best = {"compiled": True, "correct": True, "reward": reward, "device": "cpu", "policy": "strict"}
        best["timings"] = timings
        recorded = HarnessResult.from_json(best)
        o = OptimizeOutcome("S1", tmp_path / "t.jsonl", "", "done", 3, 0.0, "cpu", "strict", "m.py::M", recorded, None)
        o.status = status_of(o.result)
        o.plan = SimpleNamespace()  # a correct kernel has a plan; nothing here may apply it
        return o

    slow = {
        "eager_us": 10.0,
        "compile_us": 9.0,
        "candidate_us": 10.2,
        "speedup_vs_eager": 0.98,
        "speedup_vs_compile": 0.88,
        "method": "cpu timer",
        "trials": 100,
    }
    for case, words in (
        (outcome(None, None), "the kernel is correct but was not timed (no Profile of it finished)"),
        (outcome(slow, 1), "the kernel is correct but not faster than eager PyTorch"),
    ):
        seen: list[dict] = []
        _review(case, ReviewOptions(yes=True, json_out=True), None, None, 0, on_result=seen.append)
        assert seen[0]["applied"] is False and seen[0]["apply_note"].startswith(f"not applied: {words}")
    untimed = outcome(None, None)
    seen = []
    _review(untimed, ReviewOptions(yes=True, json_out=True), None, None, 0, on_result=seen.append)
    assert (
        "not faster" not in seen[0]["apply_note"]
        and "`cuda-agent optimize --resume S1` times it" in (seen[0]["apply_note"])
    )
    assert render.summary_line(SimpleNamespace(result=untimed.result, target="m.py::M", reward=None, plan=None)) == (
        "m.py::M · correct, not timed (no reward)"
    )


def test_no_bubblewrap_means_exit_3_unless_unsafe_is_asked_for(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if (not k.startswith("CUDA_AGENT_") or k == "CUDA_AGENT_PCH_DIR")}
    env.update(
        PATH=str(tmp_path / "empty-bin"), XDG_DATA_HOME=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path / "config")
    )
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_agent_cli", "optimize", "x.py::X", *REPLAY],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 3
    assert "bubblewrap sandbox unavailable" in proc.stderr and "--unsafe-no-sandbox" in proc.stderr


def test_a_local_server_needs_no_api_key(monkeypatch: pytest.MonkeyPatch):
    from cuda_agent_cli.errors import EnvironmentMissing
    from cuda_agent_cli.run.checks import check_model

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(EnvironmentMissing, match="OPENAI_API_KEY"):
        check_model("openai/gpt-4.1")
    check_model("openai/llama-3-8b", "http://127.0.0.1:8000/v1")  # vLLM, Ollama, ...: no key needed


def test_capture_through_the_cli_records_the_real_calls(project, tmp_path: Path):
    import json

    root, cli = project
    (root / "run.py").write_text(
        textwrap.dedent("""\
        import torch
        from blocks import Block

        block = Block()
        for _ in range(3):
            block(torch.randn(3, 7))
        open("finished.txt", "w").write("the command runs as it would without cuda-agent")
        """)
    )
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")  # the model ends the session at once: no kernel, nothing compiled
    proc = cli(
        "optimize",
        "blocks.py::Block",
        "--capture",
        f"{sys.executable} run.py",
        "--model",
        f"replay:{empty}",
        "--device",
        "cpu",
        "--batch",
        "--json",
        "--no-apply",
    )
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    assert out["status"] == "failed" and out["applied"] is False
    transcript = Path(out["transcript"]).read_text()
    assert "float32[3,7]" in transcript.replace(" ", "")
    assert (root / "finished.txt").exists()
    # What was captured is shown before the session starts, and is part of the JSON result.
    block = (
        f"captured the calls of Block in `{sys.executable} run.py`: one signature\n"
        "  1. forward(x: float32[3,7])  3 calls\n     __init__()\n"
    )
    assert block in proc.stderr
    assert proc.stderr.index(block) < proc.stderr.index("running the agent")
    assert out["inputs"]["source"] == "capture" and out["inputs"]["text"] == "float32[3,7]"
    assert out["inputs"]["args"] == [{"name": None, "tensor": {"dtype": "float32", "shape": [3, 7]}}]


# ---------------------------------------------------------------- paths checked before the session

INPUTS = ["--inputs", "x=float32[4]"]


def _one_error(proc: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "importing" not in proc.stderr  # refused before the target was even imported
    return lines[0]


def test_a_patch_path_that_cannot_take_the_patch_is_refused_at_once(project, tmp_path: Path):
    root, cli = project
    kept = tmp_path / "kept.diff"
    kept.write_text("a patch the user still needs\n")
    folder = tmp_path / "patches"
    folder.mkdir()
    for patch, words in [
        (tmp_path / "no-such-dir" / "k.diff", f"the folder {tmp_path / 'no-such-dir'} does not exist"),
        (folder, f"--patch {folder} is a folder — give a file name"),
        (kept, f"--patch {kept} already exists — remove it"),
        (Path("/sys/k.diff"), "--patch /sys/k.diff cannot be written: /sys "),
    ]:
        proc = cli("optimize", "blocks.py::Block", *REPLAY, *INPUTS, "--no-apply", "--patch", str(patch))
        assert proc.returncode == 2
        assert words in _one_error(proc)
    assert kept.read_text() == "a patch the user still needs\n"
    assert sorted(p.name for p in root.iterdir()) == ["blocks.py"]


def test_an_unusable_data_or_cache_dir_is_refused_at_once(tmp_path: Path):
    afile = tmp_path / "a-file"
    afile.write_text("")
    for var, value, words in [
        (
            "XDG_DATA_HOME",
            "/sys/cuda-agent-test",
            "the data dir /sys/cuda-agent-test/cuda-agent/sessions cannot be used: /sys ",
        ),
        ("XDG_DATA_HOME", str(afile), f"cannot be used: {afile} is a file, so"),
        ("XDG_CACHE_HOME", "/sys/cuda-agent-test", "the cache dir /sys/cuda-agent-test/cuda-agent cannot be used"),
    ]:
        env = {k: v for k, v in os.environ.items() if (not k.startswith("CUDA_AGENT_") or k == "CUDA_AGENT_PCH_DIR")}
        env.update(XDG_DATA_HOME=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path / "config"))
        env[var] = value
        (tmp_path / "blocks.py").write_text(MODULE)
        proc = subprocess.run(
            [sys.executable, "-m", "cuda_agent_cli", "optimize", "blocks.py::Block", *REPLAY, *INPUTS, "--no-apply"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2
        assert words in _one_error(proc)


def test_demo_dir_that_is_a_file_or_unwritable_is_refused(tmp_path: Path):
    afile = tmp_path / "notes.txt"
    afile.write_text("mine\n")
    env = {k: v for k, v in os.environ.items() if (not k.startswith("CUDA_AGENT_") or k == "CUDA_AGENT_PCH_DIR")}
    env.update(XDG_DATA_HOME=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path / "config"))
    for where, words in [
        (afile, f"--dir {afile} is a file"),
        (Path("/sys/demo"), "--dir /sys/demo cannot be used: /sys "),
    ]:
        proc = subprocess.run(
            [sys.executable, "-m", "cuda_agent_cli", "demo", "--dir", str(where), "--batch"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2
        assert words in _one_error(proc)
    assert afile.read_text() == "mine\n"


@pytest.mark.parametrize(
    "args, words",
    [
        (["--max-turns", "0"], "max_turns 0 from --max-turns leaves no room for a single turn"),
        (["--timeout", "-5"], "timeout -5 s from --timeout leaves no room"),
    ],
)
def test_limits_that_allow_no_turn_are_refused(project, args, words):
    _, cli = project
    proc = cli("optimize", "blocks.py::Block", *REPLAY, *INPUTS, "--no-apply", *args)
    assert proc.returncode == 2 and words in _one_error(proc)


def test_an_api_base_without_a_scheme_is_refused(project):
    _, cli = project
    proc = cli("optimize", "blocks.py::Block", "--model", "openai/x", "--api-base", "localhost:8000/v1", *INPUTS)
    assert proc.returncode == 2
    assert "--api-base localhost:8000/v1 is not an http:// or https:// URL" in _one_error(proc)


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap for a read-only mount")
def test_a_read_only_repository_is_refused_before_the_session(project):
    root, cli = project
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"], check=True
    )
    probe = subprocess.run(
        ["bwrap", "--dev-bind", "/", "/", "--ro-bind", str(root), str(root), "true"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        pytest.skip(f"bubblewrap cannot mount here: {probe.stderr.strip()}")
    proc = cli(
        "optimize",
        "blocks.py::Block",
        *REPLAY,
        *INPUTS,
        "--yes",
        "--batch",
        wrap=["bwrap", "--dev-bind", "/", "/", "--ro-bind", str(root), str(root)],
    )
    assert proc.returncode == 2
    line = _one_error(proc)
    assert f"applying the kernel would fail: {root} is on a read-only file system" in line and "--no-apply" in line


def test_the_stop_line_names_a_limit_set_in_pyproject(project):
    import json

    root, cli = project
    (root / "pyproject.toml").write_text("[tool.cuda-agent]\nmax_turns = 1\n")
    proc = cli("optimize", "blocks.py::Block", *REPLAY, *INPUTS, "--device", "cpu", "--batch", "--json", "--no-apply")
    assert proc.returncode == 1, proc.stderr
    assert "stopped: max_turns 1 from pyproject.toml" in proc.stderr.splitlines()
    out = json.loads(proc.stdout)
    assert (out["stop_reason"], out["stop_detail"], out["turns"]) == ("max_turns", "max_turns 1 from pyproject.toml", 1)

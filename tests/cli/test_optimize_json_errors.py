"""`cuda-agent optimize --json` (and `--all --batch --json`) when the input is bad: exactly one
error object on stdout, `{"status": "error", "error", "exit_code"}`, the same one line on stderr,
and the documented exit code, before any session is made."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from demo_repo import suite_env

MODULE = """\
import torch


class A(torch.nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.randn(4)]


def get_init_inputs():
    return []
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / ".git").mkdir()  # the repository's root, for the config and the progress file's key
    (root / "m.py").write_text(MODULE)
    (root / "pyproject.toml").write_text('[tool.cuda-agent]\ndevice = "cpu"\ntargets = ["m.py::A"]\n')
    return root


@pytest.fixture
def replay(tmp_path: Path) -> str:
    path = tmp_path / "give-up.jsonl"
    path.write_text(json.dumps({"content": "Nothing to do.", "tool_calls": []}) + "\n")
    return f"replay:{path}"


def cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = suite_env(api_keys=False)
    env.update(XDG_DATA_HOME=str(root.parent / "data"), XDG_CONFIG_HOME=str(root.parent / "config"))
    return subprocess.run(
        [sys.executable, "-m", "cuda_agent_cli", "optimize", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def refused(proc: subprocess.CompletedProcess[str], code: int, words: str) -> dict:
    """The one error object, checked against the exit code and the line on stderr."""
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout
    error = json.loads(lines[0])
    assert set(error) == {"status", "error", "exit_code"} and error["status"] == "error"
    assert error["exit_code"] == code and words in error["error"], error
    assert proc.stderr.strip().splitlines()[-1] == f"error: {error['error']}"
    assert "Traceback" not in proc.stderr
    return error


def sessions(root: Path) -> list[Path]:
    store = root.parent / "data" / "cuda-agent" / "sessions"
    return sorted(store.iterdir()) if store.is_dir() else []


def test_no_targets_is_one_error_object(repo: Path, replay: str):
    (repo / "pyproject.toml").write_text('[tool.cuda-agent]\ndevice = "cpu"\n')
    refused(cli(repo, "--all", "--batch", "--json", "--model", replay), 2, "has no [tool.cuda-agent] targets")
    (repo / "pyproject.toml").unlink()
    refused(cli(repo, "--all", "--batch", "--json", "--model", replay), 2, "no pyproject.toml at or above")


@pytest.mark.parametrize(
    "targets, words",
    [
        ("[3]", "entry 1 must be a target string or a table"),
        ('[{target = "m.py::A", shapes = "x"}]', "unknown key `shapes`"),
        ('["m.py::A", "bad target"]', "entry 2 (`bad target`): `bad target` does not name a class"),
        ('["gone.py::A"]', "entry 1 (`gone.py::A`): gone.py: no such file"),
        ('[{target = "m.py::A", inputs = "x=float32[4"}]', "entry 1 (`m.py::A`): inputs: cannot read"),
    ],
)
def test_a_target_that_does_not_parse_stops_the_run_before_any_session(
    repo: Path, replay: str, targets: str, words: str
):
    (repo / "pyproject.toml").write_text(f'[tool.cuda-agent]\ndevice = "cpu"\ntargets = {targets}\n')
    error = refused(cli(repo, "--all", "--batch", "--json", "--model", replay), 2, words)
    assert "pyproject.toml [tool.cuda-agent] targets" in error["error"]
    assert sessions(repo) == []


@pytest.mark.parametrize(
    "args, words",
    [
        (["m.py::A"], "so TARGET cannot go with it"),
        (["--inputs", "x=float32[4]"], "so --inputs cannot go with it"),
        (["--resume", "20260101"], "so --resume cannot go with it"),
        (["--patch", "k.diff"], "so --patch cannot go with it"),
        (["--yes", "--no-apply"], "--yes and --no-apply contradict each other"),
        (["--max-turns", "0"], "max_turns 0 from --max-turns leaves no room for a single turn"),
        (["--device", "tpu"], "`device` must be one of cuda, cpu"),
    ],
)
def test_conflicting_or_bad_flags_are_one_error_object(repo: Path, replay: str, args: list[str], words: str):
    refused(cli(repo, "--all", "--batch", "--json", "--model", replay, *args), 2, words)
    assert sessions(repo) == []


def test_the_model_is_checked_once_for_every_target(repo: Path, tmp_path: Path):
    (repo / "pyproject.toml").write_text('[tool.cuda-agent]\ndevice = "cpu"\ntargets = ["m.py::A", "m.py:A"]\n')
    missing = tmp_path / "no-such.jsonl"
    refused(cli(repo, "--all", "--batch", "--json", "--model", f"replay:{missing}"), 2, "does not exist")
    refused(cli(repo, "--all", "--batch", "--json"), 3, "no model configured")
    assert sessions(repo) == []


def _progress_file(repo: Path) -> Path:
    from cuda_agent_cli.run.batch import progress_path

    return progress_path(repo.parent / "data" / "cuda-agent", repo)


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda p: p.mkdir(), "is not a file"),
        (lambda p: p.write_bytes(b"\xff\xfe{}\n"), "is not UTF-8 text"),
        (lambda p: p.write_text('{"spec": "m.py::A", "source_sha256": "ab", "result": 3}\n'), "line 1 is not a record"),
        (lambda p: p.write_text("[1, 2]\n"), "line 1 is not a record"),
    ],
)
def test_a_progress_file_that_does_not_fit_is_refused_and_kept(repo: Path, replay: str, make, words: str):
    path = _progress_file(repo)
    path.parent.mkdir(parents=True)
    make(path)
    before = path.read_bytes() if path.is_file() else None
    error = refused(cli(repo, "--all", "--batch", "--json", "--model", replay), 2, words)
    assert str(path) in error["error"] and "move it away" in error["error"]
    assert (path.read_bytes() if path.is_file() else None) == before
    assert sessions(repo) == []


def test_single_target_errors_are_the_same_object(repo: Path, replay: str):
    refused(cli(repo, "--batch", "--json", "--model", replay), 2, "optimize needs a TARGET")
    refused(cli(repo, "m.py::A", "--resume", "x", "--json", "--model", replay), 2, "not both")
    refused(cli(repo, "m.py::A", "--json", "--yes", "--no-apply", "--model", replay), 2, "contradict each other")
    refused(cli(repo, "gone.py::A", "--json", "--model", replay), 2, "gone.py: no such file")


def test_a_target_that_does_not_resolve_is_its_own_line_and_the_rest_run(repo: Path, replay: str):
    (repo / "pyproject.toml").write_text('[tool.cuda-agent]\ndevice = "cpu"\ntargets = ["m.py::Missing", "m.py::A"]\n')
    proc = cli(repo, "--all", "--batch", "--json", "--model", replay)
    assert proc.returncode == 1, proc.stderr[-3000:]
    missing, gave_up, total = (json.loads(ln) for ln in proc.stdout.splitlines())
    assert set(missing) == {"status", "error", "exit_code", "target"} and missing["target"] == "m.py::Missing"
    assert missing["status"] == "error" and missing["exit_code"] == 2 and "no class `Missing`" in missing["error"]
    assert gave_up["status"] == "failed" and gave_up["target"] == "m.py::A"
    assert total["summary"] is True and total["by_reward"] == {"error": 1, "none": 1} and total["exit_code"] == 1
    assert len(sessions(repo)) == 1


def test_a_full_disk_is_the_error_object_with_exit_3(capsys: pytest.CaptureFixture[str]):
    import errno

    from cuda_agent_cli.cli.json_errors import errors_as_json
    from cuda_agent_cli.errors import NoSpaceLeft

    with pytest.raises(NoSpaceLeft) as exc, errors_as_json(True):
        raise OSError(errno.ENOSPC, "No space left on device", "/data/sessions/s1/best/kernel.cu")
    line = "cannot write /data/sessions/s1/best/kernel.cu: no space left on the device"
    assert exc.value.exit_code == 3 and exc.value.one_line().startswith(line + " — free some space there")
    assert json.loads(capsys.readouterr().out) == {"status": "error", "error": exc.value.one_line(), "exit_code": 3}
    with pytest.raises(PermissionError), errors_as_json(True):  # any other OSError stays what it is
        raise PermissionError(errno.EACCES, "Permission denied", "/x")
    assert capsys.readouterr().out == ""

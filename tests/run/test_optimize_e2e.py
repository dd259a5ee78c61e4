"""optimize end to end on the CPU: a recorded session, the real harness, a temporary git repository.

One session is run (stopped early by --max-turns, then resumed to the end); the review and
write-back flows (no-apply + patch, dirty refusal, answering n, --yes with a commit) reuse it
through --resume, so the compile and the baselines are paid for once.
"""

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from demo_repo import suite_env

from cuda_agent_cli.demo import replay_path

pytestmark = pytest.mark.integration

INPUTS = "x=float32[8,256,384]; init: 384"
TARGET = "models/heads.py::PooledLayerNorm"


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


class Cli:
    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root, self.env = root, env

    def __call__(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "cuda_agent_cli", *args],
            cwd=self.root,
            env=self.env,
            input=input,
            capture_output=True,
            text=True,
            timeout=600,
        )


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, harness_cache_root: Path):
    tmp = tmp_path_factory.mktemp("e2e")
    root = tmp / "repo"
    (root / "models").mkdir(parents=True)
    (root / "models" / "__init__.py").write_text("")
    # The class needs the rest of its package (models.config): it is imported, not copied.
    (root / "models" / "config.py").write_text("EPS = 1e-6\n")
    (root / "models" / "heads.py").write_text(
        textwrap.dedent('''\
        import torch
        from torch import nn

        from models.config import EPS


        class PooledLayerNorm(nn.Module):
            """Normalize every token, then average over the tokens."""

            def __init__(self, dim: int = 768, eps: float = EPS) -> None:
                super().__init__()
                self.norm = nn.LayerNorm(dim, eps=eps)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return self.norm(x).mean(dim=1)


        def build(dim: int = 384) -> PooledLayerNorm:
            return PooledLayerNorm(dim)
        ''')
    )
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "start")
    env = suite_env()
    env.update(
        XDG_DATA_HOME=str(tmp / "data"), XDG_CONFIG_HOME=str(tmp / "config"), XDG_CACHE_HOME=str(harness_cache_root)
    )
    cli = Cli(root, env)

    first = cli(
        "optimize",
        TARGET,
        "--model",
        f"replay:{replay_path('cpu')}",
        "--device",
        "cpu",
        "--inputs",
        INPUTS,
        "--max-turns",
        "4",
        "--batch",
        "--json",
    )
    second = cli(
        "optimize",
        "--resume",
        json.loads(first.stdout)["session_id"],
        "--batch",
        "--json",
        "--no-apply",
        "--patch",
        str(tmp / "kernel.diff"),
    )
    return cli, root, tmp, first, second


def one_json(proc: subprocess.CompletedProcess) -> dict:
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stdout + proc.stderr
    return json.loads(lines[0])


def without_created(text: str) -> str:
    """A review's diff, less what each review measures anew: the manifest's creation time and the
    time per call as Python makes it."""
    text = re.sub(r'^\+created = "[^"]*"\n', "", text, flags=re.M)
    return re.sub(r"^\+\w*per_call\w* = .*\n", "", text, flags=re.M)


def test_stopped_session_resumes_to_a_faster_kernel(project):
    _, root, _, first, second = project
    a = one_json(first)
    assert first.returncode == 1, first.stderr
    assert (a["status"], a["stop_reason"], a["turns"], a["applied"]) == ("failed", "max_turns", 4, False)
    b = one_json(second)
    assert second.returncode == 0, second.stderr
    assert b["session_id"] == a["session_id"] and b["turns"] == 7 and b["stop_reason"] == "done"
    assert b["status"] == "improved" and b["reward"] >= 2, b
    assert b["speedups"]["vs_eager"] > 1.05
    assert b["cost_usd"] == 0 and Path(b["transcript"]).is_file()
    assert any(p.endswith("kernels/pooled_layer_norm.cpp") for p in b["best_candidate_files"])
    print(f"\nCPU kernel: {b['timings']}")
    # --no-apply: the repository is exactly as it was
    assert git(root, "status", "--porcelain") == ""
    assert "Profile: " in second.stderr  # progress went to stderr, the JSON alone to stdout


def test_json_result_has_exactly_the_keys_docs_optimize_md_documents(project):
    from readme_keys import documented_result_keys

    _, _, _, first, second = project
    documented = documented_result_keys()
    assert len(documented) == len(set(documented)) > 10
    for proc in (first, second):  # a failed (stopped) and an improved session
        assert sorted(one_json(proc)) == sorted(documented)
    b = one_json(second)
    assert isinstance(b["warnings"], list) and b["inputs"]["text"] == "float32[8,256,384]; init: 384"
    assert one_json(first)["stop_detail"] == "max_turns 4 from --max-turns"


def test_saved_patch_applies_with_git(project):
    _, root, tmp, _, second = project
    patch = Path(one_json(second)["patch"])
    text = patch.read_text()
    assert "models/heads.py" in text and "models/_cuda_agent/pooled_layer_norm/loader.py" in text
    assert ".cuda-agent/kernels.toml" in text
    git(root, "apply", "--check", str(patch))


def test_dirty_target_is_refused_before_anything(project):
    cli, root, _, _, second = project
    sid = one_json(second)["session_id"]
    heads = root / "models" / "heads.py"
    original = heads.read_text()
    heads.write_text(original + "\n# work in progress\n")
    try:
        proc = cli("optimize", "--resume", sid, "--batch", "--yes")
        assert proc.returncode == 2
        errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
        assert len(errors) == 1 and "uncommitted changes" in errors[0] and "--allow-dirty" in errors[0]
        assert "Traceback" not in proc.stderr
        assert heads.read_text() == original + "\n# work in progress\n"
    finally:
        heads.write_text(original)
    assert git(root, "status", "--porcelain") == ""


def test_answering_n_writes_nothing(project):
    cli, root, _, _, second = project
    proc = cli("optimize", "--resume", one_json(second)["session_id"], input="n\n")
    assert proc.returncode == 0, proc.stderr
    assert "eager PyTorch" in proc.stdout and "+++ b/models/heads.py" in proc.stdout
    assert "not applied" in proc.stdout
    assert git(root, "status", "--porcelain") == ""
    # Piped: the table first, then the whole diff byte for byte (no line cut at 80 columns), then
    # the one-line summary again just above the question.
    patch = Path(one_json(second)["patch"]).read_text()
    assert max(len(ln) for ln in patch.splitlines()) > 80
    assert without_created(patch) in without_created(proc.stdout)
    assert proc.stdout.index("eager PyTorch") < proc.stdout.index("reward ") < proc.stdout.index("diff --git")
    before_prompt = proc.stdout[: proc.stdout.index("Apply this kernel")].rstrip("\n").splitlines()[-1]
    assert (
        before_prompt.startswith("models/heads.py::PooledLayerNorm · ")
        and "x vs torch.compile (reward" in before_prompt
    )


def test_plain_on_a_terminal_pages_the_diff_and_keeps_the_table_in_sight(project):
    import pty
    import re
    import threading

    cli, root, tmp, _, second = project
    paged = tmp / "paged.txt"
    env = {**cli.env, "PAGER": f"cat > {paged}", "TERM": "xterm-256color", "COLUMNS": "100", "LINES": "40"}
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cuda_agent_cli", "optimize", "--resume", one_json(second)["session_id"], "--plain"],
        cwd=root,
        env=env,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        close_fds=True,
    )
    os.close(slave)
    seen = bytearray()

    def read() -> None:
        answered = False
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            seen.extend(data)
            if not answered and b"y/N" in seen:  # rich colours the brackets apart
                os.write(master, b"n\n")
                answered = True

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert proc.wait(timeout=600) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(timeout=10)
    os.close(master)
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\r", "", seen.decode(errors="replace"))
    patch = Path(one_json(second)["patch"]).read_text()
    # the whole diff, through the pager
    assert without_created(re.sub(r"\x1b\[[0-9;]*m", "", paged.read_text())) == without_created(patch)
    assert "+++ b/models/heads.py" not in shown  # not scrolled past the table on the terminal
    assert shown.index("eager PyTorch") < shown.index("reward ") < shown.index("Apply this kernel")
    before_prompt = shown[: shown.index("Apply this kernel")].rstrip("\n").splitlines()[-1]
    assert before_prompt.startswith("models/heads.py::PooledLayerNorm · ")
    assert "not applied" in shown and git(root, "status", "--porcelain") == ""


def test_yes_commits_on_a_branch_and_the_module_still_works(project):
    cli, root, _, _, second = project
    proc = cli("optimize", "--resume", one_json(second)["session_id"], "--batch", "--json", "--yes")
    out = one_json(proc)
    assert proc.returncode == 0 and out["applied"] is True, proc.stderr
    assert out["branch"].startswith("cuda-agent/pooled_layer_norm-")
    assert git(root, "rev-parse", "--abbrev-ref", "HEAD").strip() == out["branch"]
    assert git(root, "status", "--porcelain") == ""
    assert git(root, "rev-parse", "main") != git(root, "rev-parse", "HEAD")
    manifest = (root / ".cuda-agent" / "kernels.toml").read_text()
    assert 'target = "models/heads.py::PooledLayerNorm"' in manifest and 'device = "cpu"' in manifest
    # The patched module imports and gives the original's results on the CPU, kernel or not.
    check = textwrap.dedent("""
        import torch, warnings
        warnings.simplefilter("error")
        from models.heads import PooledLayerNorm
        original = PooledLayerNorm.forward.__wrapped__
        m = PooledLayerNorm(384).eval()
        torch.nn.init.normal_(m.norm.weight); torch.nn.init.normal_(m.norm.bias)
        route = PooledLayerNorm.forward._cuda_agent_route  # (True, output) where the kernel runs
        with torch.no_grad():
            used = []
            for shape in [(8, 256, 384), (2, 5, 384)]:
                x = torch.randn(*shape)
                assert torch.allclose(m(x), original(m, x), atol=1e-4, rtol=1e-4), shape
                used.append(route(m, (x,), {})[0])
        print("kernel used:", used == [True, False])
    """)
    run = subprocess.run(
        [sys.executable, "-c", check], cwd=root, env=cli.env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "kernel used: True"


def test_resume_refuses_a_flag_that_would_change_the_session(project):
    """--device and --policy on --resume are refused in one line, before any model call; the
    session's own values (or the same ones again) go through."""
    cli, _, _, _, second = project
    sid = one_json(second)["session_id"]
    proc = cli("optimize", "--resume", sid, "--device", "cuda", "--policy", "hybrid", "--batch", "--json")
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["exit_code"] == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: --device cuda and --policy hybrid cannot change resumed session {sid}")
    assert "on cpu with policy strict" in lines[0]

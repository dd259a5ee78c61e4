"""`cuda-agent optimize --all` over two configured targets in a temporary repository: recorded
sessions on the CPU (the harness runs for real), one JSON line per target, a summary, and a
rerun that resumes instead of paying again."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from demo_repo import suite_env

from cuda_agent_cli.demo import demo_dir, replay_path

pytestmark = pytest.mark.integration

REPLAY = f"replay:{replay_path('cpu')}"
SMALL = "small_head.py::PooledLayerNorm"
VIT = "vit_head.py::PooledLayerNorm"
PYPROJECT = textwrap.dedent(f'''\
    [project]
    name = "example"
    version = "0"

    [tool.cuda-agent]
    device = "cpu"
    targets = [
      "{SMALL}",
      {{target = "{VIT}", inputs = "x=float32[8,256,384]; init: 384"}},
    ]
    ''')


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.fixture
def project(tmp_path: Path, harness_cache_root: Path):
    root = tmp_path / "repo"
    root.mkdir()
    vit = (demo_dir() / "vit_head.py").read_text()
    (root / "vit_head.py").write_text(vit)
    # The same head with get_inputs() small enough for a CPU: that target needs no inputs entry.
    (root / "small_head.py").write_text(
        vit.replace("return [768]", "return [384]").replace("torch.randn(32, 1024, 768)", "torch.randn(8, 256, 384)")
    )
    (root / "pyproject.toml").write_text(PYPROJECT)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "start")
    env = suite_env(api_keys=False)
    env.update(
        XDG_DATA_HOME=str(tmp_path / "data"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        XDG_CACHE_HOME=str(harness_cache_root),
    )

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "cuda_agent_cli", *args],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )

    return root, cli


def lines(proc: subprocess.CompletedProcess) -> list[dict]:
    return [json.loads(ln) for ln in proc.stdout.splitlines() if ln.strip()]


def test_all_targets_run_one_after_another_and_a_rerun_resumes(project):
    root, cli = project
    first = cli("optimize", "--all", "--batch", "--json", "--model", REPLAY)
    assert first.returncode == 0, first.stderr[-3000:]
    *results, total = lines(first)
    assert [r["target"] for r in results] == [SMALL, VIT]
    single_keys = set(results[0])
    for r in results:
        # Correct on every run; how much faster depends on how busy this machine is.
        assert r["status"] in ("improved", "correct") and r["reward"] in (1, 2, 3) and r["applied"] is False
        assert set(r) == single_keys and "session_id" in r and "speedups" in r
    assert results[1]["inputs"]["text"].endswith("float32[8,256,384]; init: 384")
    assert results[0]["inputs"]["source"] == "get_inputs"
    assert total["summary"] is True and total["targets"] == 2 and total["ran"] == 2 and total["skipped"] == 0
    assert sum(total["by_reward"].values()) == 2 and total["correct"] == 2
    assert total["failures"] == [] and total["cost_usd"] == 0.0
    assert git(root, "status", "--porcelain") == ""  # --batch without --yes applies nothing

    again = cli("optimize", "--all", "--batch", "--json", "--model", REPLAY)
    assert again.returncode == 0, again.stderr[-3000:]
    *same, total = lines(again)
    assert same == results and total["skipped"] == 2 and total["ran"] == 0
    assert "finished before" in again.stderr and "Profile" not in again.stderr

    # A change of one module's source runs that target again, and only that one.
    small = root / "small_head.py"
    small.write_text(small.read_text().replace("self.norm(x).mean(dim=1)", "self.norm(x).mean(dim=-2)"))
    third = cli("optimize", "--all", "--batch", "--json", "--model", REPLAY)
    assert third.returncode == 0, third.stderr[-3000:]
    *after, total = lines(third)
    assert total["ran"] == 1 and total["skipped"] == 1
    assert after[0]["session_id"] != results[0]["session_id"] and after[1] == results[1]


def test_a_failing_target_is_counted_and_the_rest_still_run(project, tmp_path: Path):
    root, cli = project
    (root / "pyproject.toml").write_text(PYPROJECT.replace(f'"{SMALL}",', '"small_head.py::NoSuchClass",'))
    give_up = tmp_path / "give-up.jsonl"
    give_up.write_text(json.dumps({"content": "Nothing to do.", "tool_calls": []}) + "\n")
    proc = cli("optimize", "--all", "--batch", "--json", "--model", f"replay:{give_up}")
    assert proc.returncode == 1, proc.stderr[-3000:]
    missing, gave_up, total = lines(proc)
    assert missing["status"] == "error" and missing["target"] == "small_head.py::NoSuchClass"
    assert "no class `NoSuchClass`" in missing["error"] and missing["exit_code"] == 2
    assert gave_up["status"] == "failed" and gave_up["target"] == VIT and gave_up["reward"] is None
    assert total["by_reward"] == {"error": 1, "none": 1} and [f["target"] for f in total["failures"]] == [
        "small_head.py::NoSuchClass",
        VIT,
    ]
    # An error is not a finished target: the rerun tries it again; the finished one is skipped.
    *_, again = lines(cli("optimize", "--all", "--batch", "--json", "--model", f"replay:{give_up}"))
    assert again["ran"] == 1 and again["skipped"] == 1


def test_all_is_refused_with_a_target_and_without_configured_targets(project):
    root, cli = project
    proc = cli("optimize", "--all", SMALL, "--batch", "--model", REPLAY)
    assert (
        proc.returncode == 2 and "--all runs the targets of pyproject.toml, so TARGET cannot go with it" in proc.stderr
    )
    (root / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "0"\n')
    proc = cli("optimize", "--all", "--batch", "--json", "--model", REPLAY)
    assert proc.returncode == 2 and "has no [tool.cuda-agent] targets" in proc.stderr
    assert 'targets = ["pkg/blocks.py::Block"' in proc.stderr and "Traceback" not in proc.stderr
    (root / "pyproject.toml").write_text('[tool.cuda-agent]\ntargets = [{target = "a.py::A", shapes = "x"}]\n')
    proc = cli("optimize", "--all", "--batch", "--model", REPLAY)
    assert proc.returncode == 2 and "unknown key `shapes`" in proc.stderr

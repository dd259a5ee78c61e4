"""`cuda-agent check --fix` on a repository where the CPU demo was applied: a kernel made broken or
stale by a real change is redone by a recorded session (the harness runs for real) and handed
back as one commit on a new branch or as a patch, with the user's branch and tree untouched."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from demo_repo import clean_env, shared_cpu_demo

from cuda_agent_cli.demo import replay_path
from cuda_agent_cli.writeback.manifest import MANIFEST_PATH

pytestmark = pytest.mark.integration

FOLDER = "_cuda_agent/pooled_layer_norm"
KERNEL = f"{FOLDER}/kernels/pooled_layer_norm.cpp"
TARGET = "vit_head.py::PooledLayerNorm"
REPLAY = f"replay:{replay_path('cpu')}"


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.fixture(scope="module")
def applied(tmp_path_factory: pytest.TempPathFactory, harness_cache_root: Path) -> Path:
    tmp = tmp_path_factory.mktemp("fix-demo")
    where = tmp / "demo"
    shared_cpu_demo(harness_cache_root, where)
    return where


@pytest.fixture
def repo(applied: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "repo"
    shutil.copytree(applied, dest, symlinks=True)
    return dest


def check(repo: Path, *args: str, cache: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cuda_agent_cli", "check", *args],
        cwd=repo,
        env={**clean_env(repo.parent, cache), **(env or {})},
        capture_output=True,
        text=True,
        timeout=900,
    )


def state(repo: Path) -> tuple[str, str, str, dict[str, bytes]]:
    """Current branch, HEAD, `git status`, and every file's bytes outside .git."""
    files = {
        p.relative_to(repo).as_posix(): p.read_bytes()
        for p in sorted(repo.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(repo).parts
    }
    return (
        git(repo, "branch", "--show-current"),
        git(repo, "rev-parse", "HEAD"),
        git(repo, "status", "--porcelain", "--untracked-files=all"),
        files,
    )


def sessions(repo: Path) -> list[str]:
    store = repo.parent / "data" / "cuda-agent" / "sessions"
    return sorted(p.name for p in store.iterdir()) if store.is_dir() else []


def test_a_broken_kernel_is_fixed_on_a_new_branch(repo: Path, harness_cache_root: Path, tmp_path: Path):
    kernel = repo / KERNEL
    kernel.write_text(kernel.read_text().replace("#include", "#include_not", 1))
    git(repo, "commit", "-qam", "a bad edit of the kernel")
    before = state(repo)
    summary = tmp_path / "fix.md"
    proc = check(
        repo,
        "--fast",
        "--fix",
        "--model",
        REPLAY,
        "--max-turns",
        "20",
        "--summary",
        str(summary),
        "--json",
        cache=harness_cache_root,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["kernels"][0]["status"] == "BROKEN"
    fix = out["fix"]
    branch = fix["branch"]
    assert branch and branch.startswith("cuda-agent/check-fix-") and fix["kernels"][0]["fixed"] is True
    # The user's branch, HEAD, index and files are exactly as they were.
    assert state(repo) == before
    # One commit on the new branch, on top of HEAD, touching only the kernel's files and the manifest.
    assert git(repo, "rev-list", "--count", f"{before[1].strip()}..{branch}").strip() == "1"
    assert git(repo, "rev-parse", f"{branch}~1") == before[1]
    touched = git(repo, "diff", "--name-only", before[1].strip(), branch).split()
    assert KERNEL in touched and MANIFEST_PATH in touched
    assert all(p == MANIFEST_PATH or p.startswith(FOLDER + "/") for p in touched), touched
    assert "#include_not" not in git(repo, "show", f"{branch}:{KERNEL}")
    assert not git(repo, "worktree", "list").strip().count("\n")  # the scratch worktree is gone
    # The branch passes the check.
    checkout = tmp_path / "branch"
    git(repo, "worktree", "add", "-q", str(checkout), branch)
    ok = check(checkout, "--fast", "--json", cache=harness_cache_root)
    assert ok.returncode == 0 and json.loads(ok.stdout)["kernels"][0]["status"] == "OK", ok.stdout
    text = summary.read_text()
    assert f"`{TARGET}` | BROKEN | fixed |" in text and f"`{branch}`" in text
    assert "rewritten (kernels/pooled_layer_norm.cpp changed)" in text
    assert "x [" in text  # speedups with their intervals
    assert branch in proc.stderr or branch in proc.stdout


def test_a_stale_kernel_in_a_dirty_tree_is_fixed_as_a_patch(repo: Path, harness_cache_root: Path, tmp_path: Path):
    module = repo / "vit_head.py"
    # The same computation written differently: the reference's code changed, so the kernel is
    # stale until it is verified again; left uncommitted, which a patch allows.
    module.write_text(module.read_text().replace("self.norm(x).mean(dim=1)", "self.norm(x).mean(dim=-2)"))
    before = state(repo)
    patches = tmp_path / "patches"
    summary = tmp_path / "fix.md"
    proc = check(
        repo,
        "--fast",
        "--fix",
        "--model",
        REPLAY,
        "--patch",
        str(patches),
        "--summary",
        str(summary),
        cache=harness_cache_root,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert state(repo) == before
    assert git(repo, "branch", "--list", "cuda-agent/check-fix-*").strip() == ""
    files = sorted(p.name for p in patches.iterdir())
    assert files == ["cuda-agent-fix.patch"]
    patch = patches / files[0]
    subprocess.run(["git", "apply", "--check", str(patch)], cwd=repo, check=True)
    assert "| STALE | fixed |" in summary.read_text()
    assert "re-verified and re-timed on this machine (its sources are unchanged)" in summary.read_text()
    subprocess.run(["git", "apply", str(patch)], cwd=repo, check=True)
    ok = check(repo, "--fast", "--json", cache=harness_cache_root)
    assert ok.returncode == 0 and json.loads(ok.stdout)["kernels"][0]["status"] == "OK", ok.stdout


def test_a_kernel_the_session_cannot_fix_is_reported_and_nothing_is_written(
    repo: Path, harness_cache_root: Path, tmp_path: Path
):
    kernel = repo / KERNEL
    kernel.write_text(kernel.read_text() + "// edited by hand\n")
    git(repo, "commit", "-qam", "hand edit")
    give_up = tmp_path / "give-up.jsonl"
    give_up.write_text(json.dumps({"content": "I cannot improve on this.", "tool_calls": []}) + "\n")
    before = state(repo)
    summary = tmp_path / "fix.md"
    proc = check(
        repo,
        "--fast",
        "--fix",
        "--model",
        f"replay:{give_up}",
        "--summary",
        str(summary),
        "--json",
        cache=harness_cache_root,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    fix = json.loads(proc.stdout)["fix"]
    assert fix["branch"] is None and fix["patch"] is None and fix["kernels"][0]["fixed"] is False
    assert "no correct kernel in the session" in fix["kernels"][0]["done"]
    assert state(repo) == before and git(repo, "branch", "--list", "cuda-agent/check-fix-*").strip() == ""
    assert f"`{TARGET}` | BROKEN | not fixed |" in summary.read_text()
    assert "no correct kernel in the session" in summary.read_text()


def test_the_fix_summary_is_appended_to_the_github_step_summary(repo: Path, harness_cache_root: Path, tmp_path: Path):
    kernel = repo / KERNEL
    kernel.write_text(kernel.read_text() + "// edited by hand\n")
    git(repo, "commit", "-qam", "hand edit")
    give_up = tmp_path / "give-up.jsonl"
    give_up.write_text(json.dumps({"content": "I cannot improve on this.", "tool_calls": []}) + "\n")
    step = tmp_path / "step-summary.md"
    step.write_text("## an earlier step\n")
    summary = tmp_path / "fix.md"
    env = {"GITHUB_STEP_SUMMARY": str(step)}
    # Without --github: the fix's summary only (the check's own needs --github), after what was there.
    proc = check(
        repo,
        "--fast",
        "--fix",
        "--model",
        f"replay:{give_up}",
        "--summary",
        str(summary),
        cache=harness_cache_root,
        env=env,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    fix_md = summary.read_text()
    assert f"`{TARGET}` | BROKEN | not fixed |" in fix_md
    assert step.read_text() == "## an earlier step\n\n" + fix_md
    # With --github: the check's summary, then the fix's, appended again.
    proc = check(repo, "--fast", "--fix", "--github", "--model", f"replay:{give_up}", cache=harness_cache_root, env=env)
    assert proc.returncode == 1, proc.stderr[-3000:]
    text = step.read_text()
    assert text.startswith("## an earlier step\n\n" + fix_md + "\n## cuda-agent check failed\n")
    check_part, _, fix_part = text[len("## an earlier step\n\n" + fix_md) :].partition("\n## cuda-agent check --fix\n")
    assert f"| BROKEN | `{TARGET}` |" in check_part
    assert f"`{TARGET}` | BROKEN | not fixed |" in fix_part and "no correct kernel in the session" in fix_part


def test_bad_input_is_one_line_and_exit_2_before_anything_runs(repo: Path, harness_cache_root: Path, tmp_path: Path):
    full = tmp_path / "full"
    full.mkdir()
    (full / "old.patch").write_text("keep me\n")
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    cases = [
        (["--fix"], "no model is configured"),
        (["--fix", "--model", REPLAY, "--patch", str(full)], "is not empty"),
        (["--fix", "--model", REPLAY, "--patch", str(a_file)], "is a file"),
        (["--fix", "--model", REPLAY, "--summary", str(a_file)], "already exists"),
        (["--patch", str(tmp_path / "new")], "only applies to --fix"),
        (["--fix", "--update", "--model", REPLAY], "pass one of them"),
        (["--fix", "--model", "replay:/no/such.jsonl"], "does not exist"),
    ]
    for args, what in cases:
        proc = check(repo, "--fast", *args, cache=harness_cache_root)
        assert proc.returncode == 2 and what in proc.stderr and "Traceback" not in proc.stderr, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    (repo / "vit_head.py").write_text((repo / "vit_head.py").read_text() + "\n# note\n")
    proc = check(repo, "--fast", "--fix", "--model", REPLAY, cache=harness_cache_root)
    assert proc.returncode == 2 and "uncommitted changes in vit_head.py" in proc.stderr and "--patch DIR" in proc.stderr
    assert (full / "old.patch").read_text() == "keep me\n" and a_file.read_text() == "x"
    assert sessions(repo) == []

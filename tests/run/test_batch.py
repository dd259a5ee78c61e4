"""[tool.cuda-agent] targets, the progress file of `optimize --all` and its summary object."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent_cli.config import TargetSetting, load_config, repo_targets
from cuda_agent_cli.errors import ConfigError
from cuda_agent_cli.run.batch import Progress, progress_path, source_hash, summary


def _repo(tmp_path: Path, table: str) -> Path:
    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text("[tool.cuda-agent]\n" + table)
    return tmp_path


def test_targets_are_strings_or_tables_and_do_not_upset_the_other_settings(tmp_path: Path):
    root = _repo(tmp_path, 'max_turns = 7\ntargets = ["a.py::A", {target = "b.py::B", inputs = "x=float32[4]"}]\n')
    entries, where = repo_targets(root)
    assert entries == [TargetSetting("a.py::A"), TargetSetting("b.py::B", "x=float32[4]")]
    assert where == root / "pyproject.toml"
    assert load_config({}, cwd=root, env={}).max_turns == 7


@pytest.mark.parametrize(
    "table, message",
    [
        ('targets = "a.py::A"\n', "must be a list"),
        ("targets = [3]\n", "entry 1 must be a target string or a table"),
        ('targets = [{inputs = "x=float32[4]"}]\n', "entry 1 has no `target` text"),
        ('targets = [{target = "a.py::A", input = "x"}]\n', "unknown key `input`"),
        ('targets = ["a.py::A", "a.py::A"]\n', "`a.py::A` is listed twice"),
    ],
)
def test_bad_targets_say_what_is_wrong(tmp_path: Path, table: str, message: str):
    with pytest.raises(ConfigError, match=message):
        repo_targets(_repo(tmp_path, table))


def test_targets_belong_to_the_repository_not_the_user_file(tmp_path: Path):
    user = tmp_path / "config" / "cuda-agent" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text('targets = ["a.py::A"]\n')
    with pytest.raises(ConfigError, match="names the repository's own targets"):
        load_config({}, cwd=tmp_path, env={"XDG_CONFIG_HOME": str(tmp_path / "config")})


def test_progress_keeps_finished_targets_by_spec_and_source(tmp_path: Path):
    path = progress_path(tmp_path / "data", tmp_path / "repo")
    p = Progress.load(path)
    a, b = TargetSetting("a.py::A"), TargetSetting("a.py::A", "x=float32[4]")
    p.record(a, "h1", {"status": "improved", "reward": 3})
    with open(path, "a") as f:
        f.write('{"spec": "b.py::B", "source_sha')  # a line cut short by a killed run
    again = Progress.load(path)
    assert again.finished(a, "h1") == {"status": "improved", "reward": 3}
    assert again.finished(a, "h2") is None and again.finished(b, "h1") is None and again.finished(a, None) is None
    # The next record starts on a line of its own, so the cut line costs only its own target.
    again.record(b, "h1", {"status": "correct", "reward": 1})
    third = Progress.load(path)
    assert third.finished(b, "h1") == {"status": "correct", "reward": 1} and third.finished(a, "h1") is not None


def test_the_source_hash_ignores_an_integration_and_follows_the_code(tmp_path: Path):
    (tmp_path / ".git").mkdir()
    module = tmp_path / "m.py"
    module.write_text("class A:\n    pass\n")
    plain = source_hash("m.py::A", tmp_path)
    module.write_text(
        "class A:\n    pass\n\n\n# cuda-agent: calls to A ...\n# run the kernel\n"
        "import runpy as _cuda_agent_runpy\nfrom pathlib import Path as _CudaAgentPath\n"
        '_cuda_agent_runpy.run_path(str(_CudaAgentPath(__file__).with_name("_cuda_agent") / "a"'
        ' / "loader.py"))["install"](A)\n'
    )
    assert source_hash("m.py::A", tmp_path) == plain
    assert source_hash("m:A", tmp_path) == plain
    module.write_text("class A:\n    x = 1\n")
    assert source_hash("m.py::A", tmp_path) != plain
    assert source_hash("missing.py::A", tmp_path) is None


def test_summary_counts_by_reward_and_lists_failures():
    results = [
        {"target": "a", "status": "improved", "reward": 3, "cost_usd": 0.5},
        {"target": "b", "status": "failed", "reward": None, "stop_detail": "max_turns 3", "cost_usd": 0.25},
        {"target": "c", "status": "error", "error": "no class `C`", "exit_code": 2},
    ]
    s = summary(results, skipped=1)
    assert s["by_reward"] == {"3": 1, "error": 1, "none": 1} and s["ran"] == 2 and s["skipped"] == 1
    assert s["failures"] == [
        {"target": "b", "status": "failed", "reason": "max_turns 3"},
        {"target": "c", "status": "error", "reason": "no class `C`"},
    ]
    assert s["cost_usd"] == 0.75 and s["exit_code"] == 1 and json.dumps(s)


def test_the_summary_has_exactly_the_keys_docs_optimize_md_documents():
    from readme_keys import documented_summary_keys

    assert list(summary([], skipped=0)) == documented_summary_keys()

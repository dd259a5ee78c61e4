"""Suite loading and identity, --tasks ranges, candidate discovery, and the resumable results file."""

import json
import subprocess
from pathlib import Path

import pytest

from cuda_agent_cli.bench import store
from cuda_agent_cli.bench.solutions import find_samples, samples_for, samples_sha256
from cuda_agent_cli.bench.suite import load_suite, parse_id_ranges, task_problems
from cuda_agent_cli.errors import BadInput

SUITE = Path(__file__).resolve().parents[1] / "bench_suite"
TASK = "import torch\nclass Model(torch.nn.Module):\n    pass\ndef get_inputs():\n    return []\n"


def test_id_ranges():
    assert parse_id_ranges("1-3,40") == {1, 2, 3, 40}
    assert parse_id_ranges(" 7 ") == {7}
    assert parse_id_ranges(None) is None and parse_id_ranges("") is None
    for bad in ("1-", "a", "5-2", "1,,x"):
        with pytest.raises(BadInput):
            parse_id_ranges(bad)


def test_kernelbench_checkout_as_it_is():
    suite = load_suite("kernelbench", SUITE)
    keys = [t.key for t in suite.tasks]
    assert keys == [
        "level1/1_ReLU",
        "level1/2_ScaleShift",
        "level1/3_RowSum",
        "level1/4_Square",
        "level1/5_NoInputs",
        "level2/1_ReluScale",
        "level2/2_AddMul",
        "level2/3_TanhSum",
    ]
    # The task without get_inputs() is kept, with its error, so the run reports it and goes on.
    errors = {t.key: t.error for t in suite.tasks if t.error}
    assert list(errors) == ["level1/5_NoInputs"] and "get_inputs()" in errors["level1/5_NoInputs"]
    # Level folders directly under the root work too, with the same tasks.
    direct = load_suite("kernelbench", SUITE / "KernelBench")
    assert [t.key for t in direct.tasks] == keys
    assert direct.identity["tasks_sha256"] == suite.identity["tasks_sha256"]


def test_levels_and_tasks_narrow_the_selection_not_the_identity():
    full = load_suite("kernelbench", SUITE)
    some = load_suite("kernelbench", SUITE, levels={2}, ids={1, 3})
    assert [t.key for t in some.tasks] == ["level2/1_ReluScale", "level2/3_TanhSum"]
    assert some.identity["tasks_sha256"] == full.identity["tasks_sha256"]
    assert some.identity["selected_sha256"] != full.identity["selected_sha256"]
    with pytest.raises(BadInput) as exc:
        load_suite("kernelbench", SUITE, levels={3})
    assert "levels present: 1, 2" in exc.value.one_line()


def test_numeric_order_and_git_identity(tmp_path: Path):
    level = tmp_path / "KernelBench" / "level1"
    level.mkdir(parents=True)
    for n in (10, 2, 1):
        (level / f"{n}_T{n}.py").write_text(TASK)
    suite = load_suite("kernelbench", tmp_path)
    assert [t.problem_id for t in suite.tasks] == [1, 2, 10]
    assert suite.identity["git"] is None
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tmp_path)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "suite"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    ident = load_suite("kernelbench", tmp_path).identity
    assert ident["git"] == {"commit": head, "dirty": False}
    # A changed reference (as KernelBench did to some problems) changes the hash, and git says so.
    (level / "2_T2.py").write_text(TASK + "# changed\n")
    changed = load_suite("kernelbench", tmp_path).identity
    assert changed["git"]["dirty"] and changed["tasks_sha256"] != ident["tasks_sha256"]


def test_not_a_suite_says_what_layout_it_expects(tmp_path: Path):
    with pytest.raises(BadInput) as exc:
        load_suite("kernelbench", tmp_path)
    assert "KernelBench/level1/1_Name.py" in exc.value.one_line()
    with pytest.raises(BadInput, match="no task files"):
        load_suite("folder", tmp_path)
    with pytest.raises(BadInput, match="does not exist"):
        load_suite("folder", tmp_path / "missing")
    (tmp_path / "x.jsonl").write_text('{"name": "a"}\n')
    with pytest.raises(BadInput, match='no string field "code"'):
        load_suite("jsonl", tmp_path / "x.jsonl")


def test_folder_and_jsonl_suites(tmp_path: Path):
    (tmp_path / "3_Add.py").write_text(TASK)
    (tmp_path / "helper.py").write_text("x = 1\n")
    suite = load_suite("folder", tmp_path)
    assert [(t.key, t.level, t.error is None) for t in suite.tasks] == [
        ("3_Add", None, True),
        ("2_helper", None, False),
    ]
    rows = [{"code": TASK, "name": "fused add"}, {"code": "class Model: pass\n", "level": 2, "problem_id": 9}]
    path = tmp_path / "ops.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    tasks = load_suite("jsonl", path).tasks
    assert [t.key for t in tasks] == ["1_fused_add", "level2/9_row2"]
    assert tasks[1].error and "get_inputs()" in tasks[1].error


def test_task_problems():
    assert task_problems(TASK) is None
    assert "does not parse" in task_problems("def (:\n")
    assert "no class Model and no get_inputs()" in task_problems("x = 1\n")


def test_solutions_both_layouts_matched_to_tasks():
    samples = find_samples(SUITE / "runs")
    tasks = {t.key: t for t in load_suite("kernelbench", SUITE).tasks}
    relu = samples_for(tasks["level1/1_ReLU"], samples)
    assert [(s.level, s.index, s.kind) for s in relu] == [(1, 0, "kernelbench"), (1, 1, "kernelbench")]
    # level1/1 and level2/1 share a problem id: the level keeps them apart.
    assert [s.level for s in samples_for(tasks["level2/1_ReluScale"], samples)] == [2, 2]
    assert samples_for(tasks["level2/2_AddMul"], samples) == []
    assert samples_sha256(relu) != samples_sha256(relu[:1])
    (workdir,) = find_samples(SUITE / "workdirs")  # CUDA-Agent layout: level1/1_ReLU/
    assert (workdir.level, workdir.problem_id, workdir.index, workdir.kind) == (1, 1, 0, "workdir")
    assert set(workdir.files()) == {"model_new.py", "kernels/relu.cpp"}
    assert samples_for(tasks["level1/1_ReLU"], [workdir]) == [workdir]


def test_workdirs_in_kernelbench_folders(tmp_path: Path):
    wd = tmp_path / "level1" / "12_Diag" / "sample_3"
    wd.mkdir(parents=True)
    (wd / "model_new.py").write_text("class ModelNew: pass\n")
    (s,) = find_samples(tmp_path)
    assert (s.level, s.problem_id, s.index, s.kind) == (1, 12, 3, "workdir")
    with pytest.raises(BadInput, match="no candidates found"):
        (tmp_path / "empty").mkdir()
        find_samples(tmp_path / "empty")


def test_results_survive_a_torn_line_and_resume_rules(tmp_path: Path):
    st = store.ResultStore(tmp_path)
    st.append({"task": "a", "task_sha256": "h", "solutions_sha256": None, "correct": True})
    with open(st.path, "a") as f:
        f.write('{"task": "b", "corr')  # a kill in the middle of a write
    st.append({"task": "c", "task_sha256": "h", "solutions_sha256": None, "correct": False})
    done = st.load()
    assert sorted(done) == ["a", "c"]
    assert store.to_skip(done, "a", "h", None, rerun_failed=True)
    assert store.to_skip(done, "c", "h", None, rerun_failed=False)
    assert not store.to_skip(done, "c", "h", None, rerun_failed=True)
    assert not store.to_skip(done, "a", "other", None, rerun_failed=False)  # the task changed
    assert not store.to_skip(done, "b", "h", None, rerun_failed=False)


def test_results_of_another_suite_version_are_never_mixed(tmp_path: Path):
    st = store.ResultStore(tmp_path)
    st.claim({"tasks_sha256": "v1"}, {"mode": "solutions", "device": "cpu", "policy": "strict", "model": None})
    st.claim({"tasks_sha256": "v1"}, {"mode": "solutions", "device": "cpu", "policy": "strict", "model": None})
    with pytest.raises(BadInput, match="another version of the suite"):
        st.claim({"tasks_sha256": "v2"}, {"mode": "solutions", "device": "cpu", "policy": "strict", "model": None})
    with pytest.raises(BadInput, match="policy='strict', not 'hybrid'"):
        st.claim({"tasks_sha256": "v1"}, {"mode": "solutions", "device": "cpu", "policy": "hybrid", "model": None})


def test_candidate_folder_is_rewritten_only_where_it_changed(tmp_path: Path):
    from cuda_agent_cli.bench.task_run import materialize

    folder = tmp_path / "sample_0"
    files = {"model_new.py": b"class ModelNew: pass\n", "kernels/a.cpp": b"// a\n"}
    materialize(folder, TASK, files)
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == [
        "binding.cpp",
        "binding_registry.h",
        "kernels/a.cpp",
        "model.py",
        "model_new.py",
    ]
    stamp = (folder / "kernels" / "a.cpp").stat().st_mtime_ns
    (folder / "kernels" / "left_over.cpp").write_text("// from an older candidate\n")
    (folder / "scratch").mkdir()
    materialize(folder, TASK, files)
    assert (folder / "kernels" / "a.cpp").stat().st_mtime_ns == stamp
    assert not (folder / "kernels" / "left_over.cpp").exists() and not (folder / "scratch").exists()
    materialize(folder, TASK, {"model_new.py": b"x = 1\n"})  # a single-file candidate: no bindings
    assert sorted(p.name for p in folder.iterdir()) == ["model.py", "model_new.py"]


def test_current_and_original_task_versions(tmp_path: Path):
    # KernelBench keeps a revised task's original definition beside it as N_Name_OLD.py.
    level = tmp_path / "KernelBench" / "level2"
    level.mkdir(parents=True)
    (level / "7_Conv_ReLU.py").write_text(TASK + "# revised\n")
    (level / "7_Conv_ReLU_OLD.py").write_text(TASK + "# original\n")
    (level / "8_Gemm.py").write_text(TASK)
    current = load_suite("kernelbench", tmp_path)
    assert [t.key for t in current.tasks] == ["level2/7_Conv_ReLU", "level2/8_Gemm"]
    assert current.tasks[0].source.endswith("# revised\n") and current.identity["task_version"] == "current"
    original = load_suite("kernelbench", tmp_path, version="original")
    # The same keys (a solution for problem 7 is matched either way), the original source.
    assert [t.key for t in original.tasks] == ["level2/7_Conv_ReLU", "level2/8_Gemm"]
    assert original.tasks[0].source.endswith("# original\n") and original.tasks[0].origin.endswith("_OLD.py")
    assert original.identity["tasks_sha256"] != current.identity["tasks_sha256"]
    with pytest.raises(BadInput, match="unknown task version"):
        load_suite("kernelbench", tmp_path, version="v0")

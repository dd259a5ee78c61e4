"""`cuda-agent bench` input checks and reports, without running the harness."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_agent_cli.bench.local_pool import parse_gpus
from cuda_agent_cli.bench.metrics import summarize
from cuda_agent_cli.bench.report import render_html, render_markdown
from cuda_agent_cli.cli.bench import task_line
from cuda_agent_cli.errors import BadInput

SUITE = Path(__file__).resolve().parents[1] / "bench_suite"


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cuda_agent_cli", "bench", *args], capture_output=True, text=True, timeout=120, cwd=cwd
    )


def one_error(proc: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    return line


def test_a_mode_is_required_and_only_one(tmp_path: Path):
    proc = cli("--root", str(SUITE), "--out", str(tmp_path / "o"), "--device", "cpu")
    assert proc.returncode == 2 and "--model M" in one_error(proc)
    proc = cli(
        "--root",
        str(SUITE),
        "--out",
        str(tmp_path / "o"),
        "--device",
        "cpu",
        "--model",
        "replay:x",
        "--solutions",
        str(SUITE / "runs"),
    )
    assert proc.returncode == 2 and "two different modes" in one_error(proc)
    assert not (tmp_path / "o").exists()


def test_a_budget_that_leaves_no_turn_is_refused_before_any_task(tmp_path: Path):
    # --max-turns and --timeout have their least values in the options; a cost of 0 passes them.
    out = tmp_path / "o"
    proc = cli(
        "--root",
        str(SUITE),
        "--out",
        str(out),
        "--device",
        "cpu",
        "--model",
        f"replay:{SUITE / 'agent'}",
        "--max-cost",
        "0",
    )
    assert proc.returncode == 2 and "max_cost 0 USD from --max-cost leaves no room for a single turn" in one_error(proc)
    assert not out.exists()


def test_an_out_that_is_a_file_is_refused_with_exit_2(tmp_path: Path):
    afile = tmp_path / "results.txt"
    afile.write_text("mine\n")
    for out, why in ((afile, f"{afile} is a file, not a folder"), (afile / "o", f"{afile} is a file, so")):
        proc = cli("--root", str(SUITE), "--out", str(out), "--device", "cpu", "--solutions", str(SUITE / "runs"))
        assert proc.returncode == 2, proc.stderr
        line = one_error(proc)
        assert line.startswith(f"error: --out {out} cannot take the results: {why}") and "give --out a folder" in line
    assert afile.read_text() == "mine\n"


def test_root_that_is_not_a_suite(tmp_path: Path):
    proc = cli(
        "--suite",
        "folder",
        "--root",
        str(tmp_path),
        "--solutions",
        str(SUITE / "runs"),
        "--device",
        "cpu",
        "--out",
        str(tmp_path / "o"),
    )
    assert proc.returncode == 2 and "N_Name.py with class Model" in one_error(proc)
    proc = cli("--suite", "jsonl", "--root", str(tmp_path), "--solutions", str(SUITE / "runs"), "--device", "cpu")
    assert proc.returncode == 2 and '"code"' in one_error(proc)


def test_unreachable_ray_address_exits_3_with_one_line(tmp_path: Path):
    proc = cli(
        "--root",
        str(SUITE),
        "--tasks",
        "3",
        "--level",
        "1",
        "--solutions",
        str(SUITE / "runs"),
        "--device",
        "cpu",
        "--out",
        str(tmp_path / "o"),
        "--ray",
        "127.0.0.1:9",
    )
    assert proc.returncode == 3
    line = one_error(proc)
    assert "cannot reach the Ray cluster at 127.0.0.1:9" in line or "not installed" in line


def test_gpus_spec():
    assert parse_gpus("all", "cpu") == [None]
    with pytest.raises(BadInput):
        parse_gpus("0,x", "cuda")


def test_plain_progress_line():
    rec = {
        "task": "level1/1_ReLU",
        "status": "correct",
        "correct": True,
        "reward": 3,
        "speedup_vs_eager": 2.5,
        "speedup_vs_compile": 1.25,
        "n_samples": 2,
        "n_correct": 1,
        "wall_s": 3.14,
    }
    assert (
        task_line(1, 8, rec)
        == "[1/8] level1/1_ReLU: correct, reward 3, 2.50x eager, 1.25x compile [1/2 samples] (3.1 s)"
    )
    bad = {"task": "t", "status": "error", "error": "the task has no get_inputs()"}
    assert task_line(2, 8, bad) == "[2/8] t: error: the task has no get_inputs()"


RECORDS = [
    {
        "task": "level1/1_A",
        "level": 1,
        "status": "correct",
        "correct": True,
        "reward": 3,
        "speedup_vs_eager": 2.0,
        "speedup_vs_compile": 1.5,
        "wall_s": 4.0,
        "warnings": ["speedup_review: 12x"],
    },
    {"task": "level2/1_B", "level": 2, "status": "failed", "correct": False, "reward": -1, "error": "a | b"},
]


def test_reports_put_ours_beside_the_paper():
    summary = summarize(RECORDS)
    summary.update(
        suite={
            "kind": "kernelbench",
            "root": "/kb",
            "git": {"commit": "abc123", "dirty": False},
            "tasks_sha256": "f" * 64,
            "tasks": 2,
            "selected": 2,
        },
        settings={"mode": "solutions", "device": "cpu", "policy": "strict"},
        finished=2,
        selected=2,
    )
    md = render_markdown(summary, RECORDS)
    assert "| pass rate | 50.0% | 98.8% |" in md
    assert "| faster than torch.compile by >5% | 50.0% | 96.8% |" in md
    assert "| geomean vs torch.compile (correct only) | 1.50x [1.50, 1.50] (n=1) | 2.11x |" in md
    assert "git abc123" in md and "- level1/1_A: speedup_review: 12x" in md and "a \\| b" in md
    page = render_html(summary, RECORDS)
    assert page.count("data:image/png;base64,") == 3
    assert "<td>98.8%</td>" in page
    json.dumps(summary)  # summary.json is plain JSON

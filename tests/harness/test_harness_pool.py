"""The harness worker: the environment it starts with (nothing from the user that could inject
code), and its zygote running several jobs at once."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuda_agent_cli import resources
from cuda_agent_cli.harness.pool import WorkerPool, clean_env


def test_clean_env_drops_injection_vectors_and_secrets() -> None:
    user = {
        "HOME": "/home/u",
        "PATH": "/evil/bin:/usr/bin",
        "PYTHONPATH": "/evil",
        "LD_PRELOAD": "/evil.so",
        "PYTHONSTARTUP": "/evil.py",
        "OPENAI_API_KEY": "sk-x",
        "ANTHROPIC_API_KEY": "k",
        "HTTPS_PROXY": "p",
        "CUDA_VISIBLE_DEVICES": "1",
        "TORCH_CUDA_ARCH_LIST": "9.0",
        "LD_LIBRARY_PATH": "/usr/local/cuda/lib64",
    }
    env = clean_env({"TORCHINDUCTOR_CACHE_DIR": "/c"}, source=user)
    for key in ("PYTHONPATH", "LD_PRELOAD", "PYTHONSTARTUP", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HTTPS_PROXY"):
        assert key not in env
    assert env["HOME"] == "/home/u" and env["CUDA_VISIBLE_DEVICES"] == "1" and env["TORCH_CUDA_ARCH_LIST"] == "9.0"
    assert env["TORCHINDUCTOR_CACHE_DIR"] == "/c"
    assert env["LD_LIBRARY_PATH"] == "/usr/local/cuda/lib64"  # how clusters find the CUDA libraries
    assert "/evil/bin" not in env["PATH"].split(":") and "/usr/bin" in env["PATH"].split(":")


# -- the jobs: one table for both sides ------------------------------------------------------------


def test_a_job_the_worker_does_not_run_is_refused_before_anything_starts(tmp_path: Path) -> None:
    pool = WorkerPool(resources.tools_dir(), clean_env(), tmp_path / "worker.log")
    with pytest.raises(ValueError, match="unknown job 'compiel'"):
        pool.submit("compiel", {}, tmp_path / "job", 60)
    assert pool._proc is None and not (tmp_path / "job").exists()  # no zygote, no spec file


_JOB_TABLE = """
import json, sys
sys.path.insert(0, {tools!r})
import wire, worker
found, refused = {{}}, []
for name, job in wire.JOBS.items():
    if job is None:
        try:
            worker._job_function(name)
        except ValueError:
            refused.append(name)
    else:
        function = worker._job_function(name)
        found[name] = [function.__module__, function.__name__]
print(json.dumps({{"found": found, "refused": refused}}))
"""


def test_the_worker_runs_each_job_of_the_table_by_its_module_and_function() -> None:
    code = _JOB_TABLE.format(tools=str(resources.tools_dir()))
    out = subprocess.run([sys.executable, "-E", "-B", "-c", code], capture_output=True, text=True, check=True)
    answer = json.loads(out.stdout.strip().splitlines()[-1])
    from cuda_agent_cli.harness import wire

    forked = {name: [job.module, job.function] for name, job in wire.JOBS.items() if job is not None}
    assert answer["found"] == forked and {"compile", "inputs", "evaluate", "judge"} <= set(forked)
    # The jobs the zygote answers itself have no code a child could run.
    assert (
        answer["refused"]
        == [name for name, job in wire.JOBS.items() if job is None]
        == [
            "service",
            "warm",
            "warm-compiler",
        ]
    )


# -- the zygote: overlapping jobs -------------------------------------------------------------

_SLOW_PROBE = """
import os, time


def run_probe_job(spec):
    start = time.time()
    time.sleep(spec.get("sleep", 0))
    if spec.get("exit") is not None:
        os._exit(spec["exit"])
    return {"pid": os.getpid(), "start": start, "end": time.time(), "nice": os.nice(0)}
"""


@pytest.fixture
def slow_pool(tmp_path: Path):
    """The real zygote (tools/worker.py, the runtime guards it imports first and what they import)
    with a probe job that sleeps on request."""
    tools = tmp_path / "tools"
    tools.mkdir()
    for path in resources.tools_dir().glob("*.py"):
        shutil.copy(path, tools / path.name)
    (tools / "worker_common.py").write_text(_SLOW_PROBE)
    pool = WorkerPool(tools, clean_env(), tmp_path / "worker.log")
    yield pool, tmp_path
    pool.close()


def test_jobs_submitted_together_run_at_the_same_time(slow_pool) -> None:
    pool, tmp = slow_pool
    pool.run("probe", {}, tmp / "warm", 60)  # the zygote is up
    start = time.perf_counter()
    a = pool.submit("probe", {"sleep": 1.0}, tmp / "a", 60)
    b = pool.submit("probe", {"sleep": 1.0}, tmp / "b", 60)
    ra, rb = pool.wait(a), pool.wait(b)
    assert ra.ok and rb.ok and ra.result["pid"] != rb.result["pid"]
    assert ra.result["start"] < rb.result["end"] and rb.result["start"] < ra.result["end"]
    assert time.perf_counter() - start < 1.9


def test_a_fast_job_is_collected_while_a_slow_one_still_runs(slow_pool) -> None:
    pool, tmp = slow_pool
    slow = pool.submit("probe", {"sleep": 1.5}, tmp / "slow", 60)
    fast = pool.submit("probe", {"sleep": 0.0}, tmp / "fast", 60)
    got_fast = pool.wait(fast)
    collected_at = time.time()
    got_slow = pool.wait(slow)
    assert got_fast.ok and got_slow.ok
    assert collected_at < got_slow.result["end"] - 0.5  # not held back behind the slow job
    assert pool.wait(slow) is got_slow  # asking again gives the same outcome at once
    again = pool.submit("probe", {"sleep": 0.0}, tmp / "again", 60)
    assert pool.wait(again).ok


def test_one_job_timing_out_or_crashing_leaves_the_others_alone(slow_pool) -> None:
    pool, tmp = slow_pool
    hang = pool.submit("probe", {"sleep": 30}, tmp / "hang", 1.0)
    crash = pool.submit("probe", {"exit": 3}, tmp / "crash", 60)
    fine = pool.submit("probe", {"sleep": 0.2}, tmp / "fine", 60)
    assert pool.wait(fine).ok
    crashed = pool.wait(crash)
    assert crashed.status == "crash" and crashed.returncode == 3
    hung = pool.wait(hang)
    assert hung.status == "timeout" and "time limit" in hung.describe_failure()
    assert pool.run("probe", {}, tmp / "after", 60).ok


def test_work_beside_a_build_can_run_at_lower_priority(slow_pool) -> None:
    pool, tmp = slow_pool
    normal = pool.run("probe", {}, tmp / "normal", 60).result["nice"]
    lowered = pool.wait(pool.submit("probe", {}, tmp / "lowered", 60, nice=5)).result["nice"]
    assert lowered == min(19, normal + 5)

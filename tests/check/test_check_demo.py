"""`cuda-agent check` and `cuda-agent build` on a repository where the CPU demo was applied: every
status comes from a real change to a copy of that repository, each with its exit code."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from demo_repo import clean_env, own_builds, shared_cpu_demo

from cuda_agent_cli.writeback.manifest import MANIFEST_PATH, load_manifest, render_manifest

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent
FOLDER = "_cuda_agent/pooled_layer_norm"


@pytest.fixture(scope="module")
def applied(tmp_path_factory: pytest.TempPathFactory, harness_cache_root: Path) -> Path:
    """One repository with the CPU demo applied, made once for this module."""
    tmp = tmp_path_factory.mktemp("check-demo")
    where = tmp / "demo"
    assert shared_cpu_demo(harness_cache_root, where)["applied"] is True
    return where


@pytest.fixture
def repo(applied: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "repo"
    shutil.copytree(applied, dest, symlinks=True)
    return dest


def check(repo: Path, *args: str, cache: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    e = clean_env(repo.parent, cache)
    e.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "cuda_agent_cli", "check", *args],
        cwd=repo,
        env=e,
        capture_output=True,
        text=True,
        timeout=900,
    )


def check_json(repo: Path, *args: str, cache: Path) -> tuple[int, dict]:
    proc = check(repo, *args, "--json", cache=cache)
    assert proc.stdout.strip(), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def edit_manifest(repo: Path, **changes) -> None:
    path = repo / MANIFEST_PATH
    entries = load_manifest(path.read_text()).kernels
    entries[0].update(changes)
    path.write_text(render_manifest(entries))


def only(report: dict) -> dict:
    assert len(report["kernels"]) == 1, report
    return report["kernels"][0]


# ---------------------------------------------------------------- static statuses


def test_fast_check_of_an_unchanged_repository_is_ok(repo: Path, harness_cache_root: Path):
    code, out = check_json(repo, "--fast", cache=harness_cache_root)
    assert code == 0 and only(out)["status"] == "OK" and out["mode"] == "fast"
    assert out["seconds"] < 5
    table = check(repo, "--fast", cache=harness_cache_root)
    assert table.returncode == 0 and re.search(r"^OK\s+vit_head.py::PooledLayerNorm\s+cpu", table.stdout, re.M)


def test_editing_the_reference_makes_it_stale(repo: Path, harness_cache_root: Path):
    module = repo / "vit_head.py"
    text = module.read_text()
    # A comment alone is not a change of the reference...
    module.write_text(text.replace("# x: [batch, tokens, dim] -> [batch, dim]", "# reworded comment"))
    assert check_json(repo, "--fast", cache=harness_cache_root)[0] == 0
    # ...a change of what it computes is.
    module.write_text(text.replace("self.norm(x).mean(dim=1)", "self.norm(x).mean(dim=1) * 2"))
    code, out = check_json(repo, "--fast", cache=harness_cache_root)
    k = only(out)
    assert code == 1 and k["status"] == "STALE" and "source of PooledLayerNorm changed" in k["message"]
    assert k["file"] == "vit_head.py" and k["line"] == 13


def test_a_new_signature_is_stale(repo: Path, harness_cache_root: Path):
    module = repo / "vit_head.py"
    module.write_text(
        module.read_text().replace(
            "def forward(self, x: torch.Tensor)", "def forward(self, x: torch.Tensor, scale: float = 1.0)"
        )
    )
    code, out = check_json(repo, "--fast", cache=harness_cache_root)
    assert code == 1 and only(out)["status"] == "STALE"
    assert any(f["code"] == "signature-changed" for f in only(out)["findings"])


def test_corrupting_the_kernel_source_makes_it_broken(repo: Path, harness_cache_root: Path):
    kernel = repo / FOLDER / "kernels" / "pooled_layer_norm.cpp"
    kernel.write_text(kernel.read_text().replace("#include", "#include_not", 1))
    code, out = check_json(repo, "--fast", cache=harness_cache_root)
    k = only(out)
    assert code == 1 and k["status"] == "BROKEN" and "kernels/pooled_layer_norm.cpp was edited" in k["message"]
    (repo / FOLDER / "verified.json").unlink()
    k = only(check_json(repo, "--fast", cache=harness_cache_root)[1])
    assert {f["code"] for f in k["findings"]} >= {"source-edited", "source-missing"}


def test_removing_the_integration_lines_is_broken(repo: Path, harness_cache_root: Path):
    module = repo / "vit_head.py"
    module.write_text("".join(ln for ln in module.read_text().splitlines(keepends=True) if "_cuda_agent" not in ln))
    code, out = check_json(repo, "--fast", cache=harness_cache_root)
    assert code == 1 and only(out)["status"] == "BROKEN" and "no longer hands PooledLayerNorm" in only(out)["message"]


def test_a_recorded_architecture_that_differs_is_new_arch(repo: Path, harness_cache_root: Path):
    import platform

    other = "aarch64" if platform.machine() != "aarch64" else "x86_64"
    edit_manifest(repo, arch=other)
    code, out = check_json(repo, "--fast", cache=harness_cache_root)
    assert code == 1 and only(out)["status"] == "NEW-ARCH" and f"verified on a {other} CPU" in only(out)["message"]
    edit_manifest(repo, arch=platform.machine(), torch="1.13.1+cpu")
    code, out = check_json(repo, "--fast", cache=harness_cache_root)
    assert code == 1 and only(out)["status"] == "NEW-ARCH" and "torch 1.13.1+cpu" in only(out)["message"]


def test_a_version_1_manifest_is_read_and_staleness_still_found(repo: Path, harness_cache_root: Path):
    entry = load_manifest((repo / MANIFEST_PATH).read_text()).kernels[0]
    v1 = {
        k: v
        for k, v in entry.items()
        if k
        not in (
            "module_file",
            "folder",
            "files",
            "reference_sha256",
            "signature",
            "arch",
            "cpu",
            "trials",
            "inputs_source",
        )
    }
    v1["reference_sha256"] = v1.pop("module_sha256")
    text = render_manifest([v1]).replace("version = 2\n", "")
    assert "version" not in tomllib.loads(text)
    (repo / MANIFEST_PATH).write_text(text)
    code, out = check_json(repo, "--fast", cache=harness_cache_root)
    k = only(out)
    assert code == 0 and k["status"] == "NOT-MEASURED" and "check --update" in k["message"]
    assert check(repo, "--fast", "--strict", cache=harness_cache_root).returncode == 1
    module = repo / "vit_head.py"
    module.write_text(module.read_text() + "\nEXTRA = 1\n")
    assert only(check_json(repo, "--fast", cache=harness_cache_root)[1])["status"] == "STALE"


def test_files_and_changed_since_pick_the_kernels_checked(repo: Path, harness_cache_root: Path):
    (repo / "notes.py").write_text("x = 1\n")
    code, out = check_json(repo, "--fast", "notes.py", cache=harness_cache_root)
    assert code == 0 and out["kernels"] == [] and "none of the given files" in out["notes"][0]
    kernel = repo / FOLDER / "kernels" / "pooled_layer_norm.cpp"
    kernel.write_text(kernel.read_text() + "// edited\n")
    code, out = check_json(repo, "--fast", str(kernel), cache=harness_cache_root)
    assert code == 1 and only(out)["status"] == "BROKEN"
    code, out = check_json(repo, "--fast", "--changed-since", "HEAD", cache=harness_cache_root)
    assert code == 1 and only(out)["status"] == "BROKEN"
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=repo, check=True)
    code, out = check_json(repo, "--fast", "--changed-since", "HEAD", cache=harness_cache_root)
    assert code == 0 and out["kernels"] == []
    bad = check(repo, "--fast", "--changed-since", "no-such-ref", cache=harness_cache_root)
    assert bad.returncode == 2 and "no such commit" in bad.stderr and "Traceback" not in bad.stderr


def test_bad_input_is_one_line_and_exit_2(repo: Path, harness_cache_root: Path, tmp_path: Path):
    for args, what in (
        (["--fast", "--update"], "--update records new measurements"),
        (["--fast", "--threshold", "lots"], "threshold must be"),
        (["--fast", str(tmp_path / "missing")], "no such file or directory"),
        (["--fast", "--junit", str(tmp_path)], "cannot write a file there"),
    ):
        proc = check(repo, *args, cache=harness_cache_root)
        assert proc.returncode == 2 and what in proc.stderr and "Traceback" not in proc.stderr, (args, proc.stderr)
    (repo / "pyproject.toml").write_text("[tool.cuda-agent.check]\nthreshold = 2.0\n")
    proc = check(repo, "--fast", cache=harness_cache_root)
    assert proc.returncode == 2 and "[tool.cuda-agent.check]" in proc.stderr
    (repo / "pyproject.toml").write_text('[tool.cuda-agent.check]\nthreshold = "20%"\n')
    assert check_json(repo, "--fast", cache=harness_cache_root)[1]["threshold"] == pytest.approx(0.2)
    (repo / MANIFEST_PATH).write_text("[[kernel]\n")
    proc = check(repo, "--fast", cache=harness_cache_root)
    assert proc.returncode == 2 and "not valid TOML" in proc.stderr


# ---------------------------------------------------------------- outputs


def test_junit_sarif_and_github_outputs(repo: Path, harness_cache_root: Path, tmp_path: Path):
    jsonschema = pytest.importorskip("jsonschema")
    kernel = repo / FOLDER / "kernels" / "pooled_layer_norm.cpp"
    kernel.write_text(kernel.read_text() + "// edited\n")
    summary = tmp_path / "summary.md"
    proc = check(
        repo,
        "--fast",
        "--github",
        "--junit",
        str(tmp_path / "junit.xml"),
        "--sarif",
        str(tmp_path / "out.sarif"),
        cache=harness_cache_root,
        env={"GITHUB_STEP_SUMMARY": str(summary)},
    )
    assert proc.returncode == 1
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert suite.get("tests") == "1" and suite.get("failures") == "1"
    case = suite.find("testcase")
    assert case.get("name") == "vit_head.py::PooledLayerNorm" and case.find("failure").get("type") == "BROKEN"
    doc = json.loads((tmp_path / "out.sarif").read_text())
    schema = json.loads((HERE / "sarif-schema-2.1.0.json").read_text())
    jsonschema.validate(doc, schema)
    result = doc["runs"][0]["results"][0]
    assert result["ruleId"] == "BROKEN" and result["level"] == "error"
    assert (
        result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        == f"{FOLDER}/kernels/pooled_layer_norm.cpp"
    )
    errors = [ln for ln in proc.stdout.splitlines() if ln.startswith("::error ")]
    assert len(errors) == 1 and f"file={FOLDER}/kernels/pooled_layer_norm.cpp,line=1," in errors[0]
    assert "| BROKEN | `vit_head.py::PooledLayerNorm` |" in summary.read_text()


def test_github_annotations_are_capped_at_ten(repo: Path, harness_cache_root: Path):
    kernels = repo / FOLDER / "kernels"
    for i in range(12):
        (kernels / f"extra_{i}.cpp").write_text("// added\n")
    proc = check(repo, "--fast", "--github", cache=harness_cache_root)
    errors = [ln for ln in proc.stdout.splitlines() if ln.startswith("::error ")]
    assert proc.returncode == 1 and len(errors) == 10
    assert "more findings are in the job summary" in proc.stdout.splitlines()[-1]


# ---------------------------------------------------------------- CUDA kernels on this machine


def test_a_cuda_kernel_here_is_not_measured(tmp_path: Path, harness_cache_root: Path):
    """The CUDA demo kernel integrated by the write-back code, as a GPU session would: this
    machine has no CUDA GPU (or a CPU torch), so neither mode may call it OK."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU: the gpu tier checks the CUDA demo for real")
    from cuda_agent_cli import demo
    from cuda_agent_cli.harness_result import HarnessResult
    from cuda_agent_cli.task.resolve import resolve_task
    from cuda_agent_cli.writeback.apply import apply_plan
    from cuda_agent_cli.writeback.git import init_repo
    from cuda_agent_cli.writeback.plan import plan_for_session

    root = tmp_path / "cuda-repo"
    demo.copy_example(root)
    init_repo(root, "start")
    task = resolve_task(f"{demo.EXAMPLE}::{demo.CLASS}", root)
    here = demo.demo_dir()
    files = {
        "model_new.py": (here / "model_new.py").read_text(),
        **{f"kernels/{n}": (here / "cuda" / n).read_text() for n in demo.KERNELS["cuda"]},
    }
    best = {
        "correct": True,
        "reward": 3,
        "environment": {"gpu": "NVIDIA H200", "torch": "2.13.0+cu128", "cuda": "12.8"},
        "timings": {
            "eager_us": 1510.0,
            "compile_us": 1020.0,
            "candidate_us": 640.0,
            "speedup_vs_eager": 2.36,
            "speedup_vs_compile": 1.59,
            "method": "cuda events",
            "trials": 100,
        },
    }
    plan = plan_for_session(
        task, files, None, "cuda", "strict", HarnessResult.from_json(best), "20260101-000000-abcdef"
    )
    apply_plan(plan, commit=True, allow_dirty=False)
    code, out = check_json(root, "--fast", cache=harness_cache_root)
    k = only(out)
    assert code == 0 and k["status"] == "NOT-MEASURED" and k["device"] == "cuda"
    assert re.search(r"no CUDA GPU here|has no CUDA support", k["message"])
    assert check(root, "--fast", "--strict", cache=harness_cache_root).returncode == 1
    code, out = check_json(root, cache=harness_cache_root)  # full mode
    assert code == 0 and only(out)["status"] == "NOT-MEASURED" and only(out)["measured"] is None


# ---------------------------------------------------------------- full mode


def test_full_check_measures_and_finds_a_regression(repo: Path, harness_cache_root: Path, tmp_path: Path):
    # A record far above what this kernel can reach on any CPU; the torch.compile record is set
    # below 1.0 so that a busy machine's noise there cannot decide the status instead.
    edit_manifest(repo, speedup_vs_eager=1000.0, speedup_vs_eager_interval=[990.0, 1010.0], speedup_vs_compile=0.5)
    code, out = check_json(repo, "--junit", str(tmp_path / "junit.xml"), cache=harness_cache_root)
    k = only(out)
    assert code == 1 and k["status"] == "REGRESSED", k
    assert k["measured"]["correct"] is True and k["measured"]["timings"]["speedup_vs_eager"] < 1000
    assert "recorded 1000.00x" in k["message"]
    case = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite/testcase")
    assert case.find("failure").get("type") == "REGRESSED"
    # --update records what was measured (the build of the first run is reused), and the next
    # check is OK.
    code, out = check_json(repo, "--update", cache=harness_cache_root)
    k = only(out)
    assert code == 0 and k["updated"] is True and out["updated_manifest"] is True
    entry = load_manifest((repo / MANIFEST_PATH).read_text()).kernels[0]
    assert entry["speedup_vs_eager"] == k["measured"]["timings"]["speedup_vs_eager"] and "updated" in entry
    assert entry["files"] and entry["reference_sha256"]
    assert check_json(repo, "--fast", cache=harness_cache_root)[0] == 0


# ---------------------------------------------------------------- build and the loader

FIRST_CALL = textwrap.dedent("""
    import sys, time, warnings
    warnings.simplefilter("always")
    import torch
    from vit_head import PooledLayerNorm
    original = PooledLayerNorm.forward.__wrapped__
    m = PooledLayerNorm(384).eval()
    x = torch.randn(8, 256, 384)
    route = getattr(PooledLayerNorm.forward, "_cuda_agent_route", None)  # (True, output) where the kernel ran
    with torch.no_grad():
        start = time.perf_counter()
        used, y = route(m, (x,), {}) if route else (False, None)
        if not used:
            y = m(x)
        seconds = time.perf_counter() - start
        same = torch.allclose(y, original(m, x), atol=1e-4, rtol=1e-4)
    print(f"used={used} same={same} seconds={seconds:.3f}")
""")


def _first_call(repo: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", FIRST_CALL],
        cwd=repo,
        env={**env, "PYTHONPATH": str(repo)},
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_no_compiler_at_run_time_falls_back_with_one_warning(repo: Path, tmp_path: Path):
    env = own_builds(clean_env(tmp_path, tmp_path / "empty-cache"))
    env["PATH"] = str(tmp_path / "no-tools")  # no c++ here, and nothing built yet
    run = _first_call(repo, env)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "used=False same=True" in run.stdout
    assert run.stderr.count("cuda-agent: the kernel for PooledLayerNorm is off") == 1
    assert "no C++ compiler" in run.stderr


def test_build_ahead_of_time_then_the_first_call_needs_no_compiler(repo: Path, tmp_path: Path):
    cache = tmp_path / "kernels"
    env = own_builds(clean_env(tmp_path, tmp_path / "cache"))
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_agent_cli", "build", str(repo), "--cache-dir", str(cache), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    built = json.loads(proc.stdout)["kernels"][0]
    assert built["ok"] and built["built"] and Path(built["library"]).is_file()
    again = subprocess.run(
        [sys.executable, "-m", "cuda_agent_cli", "build", str(repo), "--cache-dir", str(cache)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert again.returncode == 0 and "already built" in again.stderr
    run_env = {**env, "CUDA_AGENT_KERNEL_CACHE": str(cache), "PATH": str(tmp_path / "no-tools")}
    run = _first_call(repo, run_env)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "used=True same=True" in run.stdout and "building" not in run.stderr and "off" not in run.stderr
    seconds = float(run.stdout.split("seconds=")[1])
    print(f"\nfirst call after `cuda-agent build`: {seconds:.3f} s")


def test_build_into_a_cache_dir_leaves_the_kernel_there_when_another_cache_had_it(
    repo: Path, tmp_path: Path, harness_cache_root: Path
):
    # Another cache holds this kernel already: the one applying it built it in.
    built_in = Path(os.environ.get("CUDA_AGENT_KERNEL_CACHE") or harness_cache_root / "cuda-agent" / "extensions")
    other = tmp_path / "other" / "cuda-agent" / "extensions"
    for folder in built_in.glob("cuda_agent_pooled_layer_norm_*"):
        shutil.copytree(folder, other / folder.name)
    env = own_builds(clean_env(tmp_path, tmp_path / "other"))
    target = tmp_path / "ship"
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_agent_cli", "build", str(repo), "--cache-dir", str(target), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    built = json.loads(proc.stdout)["kernels"][0]
    assert Path(built["library"]).is_file() and Path(built["library"]).is_relative_to(target)
    assert not built["built"], built  # copied from the other cache, not compiled again
    run = _first_call(
        repo,
        {
            **clean_env(tmp_path, tmp_path / "empty"),
            "CUDA_AGENT_KERNEL_CACHE": str(target),
            "PATH": str(tmp_path / "no-tools"),
        },
    )
    assert "used=True same=True" in run.stdout, run.stderr[-2000:]


def test_the_loader_says_once_what_it_builds_and_how_long_it_took(repo: Path, tmp_path: Path):
    env = own_builds(clean_env(tmp_path, tmp_path / "cache"))
    run = _first_call(repo, env)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "used=True same=True" in run.stdout
    assert run.stderr.count("cuda-agent: building the cpu kernel for PooledLayerNorm") == 1
    assert re.search(r"cuda-agent: built the kernel for PooledLayerNorm in \d+\.\d s", run.stderr)


def test_build_refuses_a_folder_without_kernels(tmp_path: Path):
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_agent_cli", "build", str(tmp_path)],
        env=clean_env(tmp_path, tmp_path / "c"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "no integrated kernels to build" in proc.stderr


# ---------------------------------------------------------------- pre-commit


def test_pre_commit_hook_runs_the_fast_check_on_changed_files(repo: Path, harness_cache_root: Path, tmp_path: Path):
    pytest.importorskip("pre_commit")
    project = HERE.parents[1]
    if not (project / ".git").exists():
        pytest.skip("the hook repository must be a git checkout for pre-commit try-repo")
    env = clean_env(tmp_path, harness_cache_root)
    env.update(
        PRE_COMMIT_HOME=str(tmp_path / "pre-commit"),
        PATH=str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", ""),
    )

    def hook(*files: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "pre_commit", "try-repo", str(project), "cuda-agent-check", "--files", *files],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )

    ok = hook("vit_head.py")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "cuda-agent check --fast" in ok.stdout and "Passed" in ok.stdout
    kernel = f"{FOLDER}/kernels/pooled_layer_norm.cpp"
    (repo / kernel).write_text((repo / kernel).read_text() + "// edited\n")
    bad = hook(kernel)
    assert bad.returncode == 1 and "Failed" in bad.stdout and "BROKEN" in bad.stdout

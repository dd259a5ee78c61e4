"""Write-back: the patch, the module integration, the manifest, git safety and the call routing."""

import hashlib
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import pytest
import torch

from cuda_agent_cli.errors import WriteBackRefused
from cuda_agent_cli.kernel_files import KernelFiles
from cuda_agent_cli.task.inputs import parse_inputs_spec
from cuda_agent_cli.writeback.apply import apply_plan, build_plan
from cuda_agent_cli.writeback.diff import FileChange, unified_patch, write_changes
from cuda_agent_cli.writeback.integrate import IntegrationSpec, Verified, patch_module, plan_integration
from cuda_agent_cli.writeback.manifest import MANIFEST_PATH, parse_manifest, updated_manifest

MODULE = """import torch


class Scale(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(0.5, 1.5, dim))

    def forward(self, x, alpha=1.0):
        return x * self.w * alpha


def helper():
    return Scale(8)
"""

# Stands in for a built extension in the routing tests: distinguishable output (+1000).
MODEL_NEW = """import torch
import cuda_extension


class ModelNew(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.w = torch.nn.Parameter(torch.empty(dim))

    def forward(self, x):
        return x * self.w + 1000.0
"""


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "scale.py").write_text(MODULE)
    (root / "notes.txt").write_text("mine\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "start")
    return root


def verified() -> Verified:
    return Verified(
        device="cpu",
        call=parse_inputs_spec("x=float32[4,8]; init: 8"),
        forward_params=("x", "alpha"),
        parameters=(("w", "float32", (8,)),),
        training_sensitive=False,
    )


def plan_for(repo: Path, session: str = "20260101-000000-abc123"):
    return _build(
        dict(
            module_file=repo / "pkg" / "scale.py",
            module_source=(repo / "pkg" / "scale.py").read_text(),
            class_name="Scale",
            class_snake="scale",
            class_end=11,
            display="pkg/scale.py::Scale",
            session_id=session,
            candidate_files={"model_new.py": MODEL_NEW, "kernels/scale.cpp": "// kernel\n"},
            binding_files={
                "binding.cpp": "PYBIND11_MODULE(cuda_extension, m) {}\n",
                "binding_registry.h": "#pragma once\n",
            },
            verified=verified(),
            manifest_entry={"target": "pkg/scale.py::Scale", "speedup_vs_eager": 1.5, "speedup_vs_compile": 1.2},
            fallback_root=repo,
        )
    )


def _build(args: dict):
    """build_plan over the arguments as one dict: the integration spec's fields (the candidate's
    files as `candidate_files`), `manifest_entry` and `fallback_root`."""
    spec = dict(args)
    entry, root = spec.pop("manifest_entry"), spec.pop("fallback_root")
    spec["candidate"] = KernelFiles.of(spec.pop("candidate_files"))
    return build_plan(IntegrationSpec(**spec), manifest_entry=entry, fallback_root=root)


# ---------------------------------------------------------------- diff


def test_patch_applies_with_git_and_reproduces_every_file(repo: Path, tmp_path: Path):
    changes = [
        FileChange("notes.txt", "mine\nmore", "mine\n"),  # no newline at the end
        FileChange("new/dir/file.py", "print(1)\n"),  # new file
        FileChange("pkg/scale.py", None, MODULE),  # deleted
    ]
    patch = unified_patch(changes)
    assert "new file mode 100644" in patch and "deleted file mode 100644" in patch
    (tmp_path / "p.diff").write_text(patch)
    git(repo, "apply", "--check", str(tmp_path / "p.diff"))
    git(repo, "apply", str(tmp_path / "p.diff"))
    assert (repo / "notes.txt").read_text() == "mine\nmore"
    assert (repo / "new/dir/file.py").read_text() == "print(1)\n"
    assert not (repo / "pkg/scale.py").exists()


def test_write_changes_writes_and_deletes(tmp_path: Path):
    (tmp_path / "old.txt").write_text("x")
    write_changes(tmp_path, [FileChange("a/b.txt", "hi"), FileChange("old.txt", None, "x")])
    assert (tmp_path / "a/b.txt").read_text() == "hi" and not (tmp_path / "old.txt").exists()


# ---------------------------------------------------------------- module patch


def test_module_patch_is_small_and_applying_twice_leaves_one(repo: Path):
    once = patch_module(MODULE, "Scale", "scale", 11, verified())
    added = [ln for ln in once.splitlines() if ln not in MODULE.splitlines()]
    assert 3 <= len(added) <= 6
    assert "cpu, x: float32[4, 8]" in once
    assert once.index('["install"](Scale)') < once.index("def helper")
    twice = patch_module(once, "Scale", "scale", 11, verified())
    assert twice.count('["install"](Scale)') == 1
    assert twice == once
    compile(once, "scale.py", "exec")


def test_plan_integration_lists_every_file_next_to_the_module(repo: Path):
    changes = plan_integration(
        IntegrationSpec(
            module_file=repo / "pkg" / "scale.py",
            module_source=MODULE,
            class_name="Scale",
            class_snake="scale",
            class_end=11,
            display="pkg/scale.py::Scale",
            session_id="s",
            candidate=KernelFiles.of({"model_new.py": MODEL_NEW, "kernels/k.cpp": "//\n", "scratch/x": "no"}),
            binding_files={"binding.cpp": "PYBIND11_MODULE(cuda_extension, m) {}\n", "binding_registry.h": ""},
            verified=verified(),
        ),
        repo,
    )
    paths = [c.path for c in changes]
    assert paths[0] == "pkg/scale.py"
    assert set(paths[1:]) == {
        f"pkg/_cuda_agent/scale/{n}"
        for n in ("binding.cpp", "binding_registry.h", "kernels/k.cpp", "loader.py", "model_new.py", "verified.json")
    }
    binding = next(c.new for c in changes if c.path.endswith("binding.cpp"))
    assert "PYBIND11_MODULE(TORCH_EXTENSION_NAME," in binding


# ---------------------------------------------------------------- manifest


def test_manifest_replaces_the_same_target_and_keeps_others():
    first = updated_manifest(None, {"target": "a.py::A", "speedup_vs_eager": 1.25, "note": 'quote " and \\'})
    second = updated_manifest(first, {"target": "b.py::B", "inputs": "x=float32[2]", "ok": True})
    third = updated_manifest(second, {"target": "a.py::A", "speedup_vs_eager": 2.0})
    entries = parse_manifest(third)
    assert [e["target"] for e in entries] == ["b.py::B", "a.py::A"]
    assert entries[1]["speedup_vs_eager"] == 2.0 and entries[0]["ok"] is True
    assert tomllib.loads(first)["kernel"][0]["note"] == 'quote " and \\'


def test_broken_manifest_is_refused_not_overwritten():
    with pytest.raises(WriteBackRefused):
        updated_manifest("[[kernel]\n", {"target": "x"})


# ---------------------------------------------------------------- apply and git


def test_apply_commits_on_a_new_branch_and_leaves_other_work_alone(repo: Path):
    (repo / "notes.txt").write_text("mine, edited\n")  # unrelated uncommitted work
    plan = plan_for(repo)
    assert plan.branch == "cuda-agent/scale-abc123"
    result = apply_plan(plan, commit=True, allow_dirty=False)
    assert result.branch == "cuda-agent/scale-abc123" and result.previous_branch == "main"
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "cuda-agent/scale-abc123"
    committed = git(repo, "show", "--name-only", "--format=", "HEAD").split()
    assert "notes.txt" not in committed and "pkg/scale.py" in committed and MANIFEST_PATH in committed
    assert (repo / "notes.txt").read_text() == "mine, edited\n"
    assert git(repo, "status", "--porcelain").strip() == "M notes.txt"
    entry = parse_manifest((repo / MANIFEST_PATH).read_text())[0]
    assert entry["target"] == "pkg/scale.py::Scale"
    assert "1.50x vs eager, 1.20x vs torch.compile" in git(repo, "log", "-1", "--format=%B")


def test_dirty_target_is_refused_unless_allowed(repo: Path):
    plan = plan_for(repo)
    (repo / "pkg" / "scale.py").write_text(MODULE + "\n# my edit\n")
    with pytest.raises(WriteBackRefused) as info:
        apply_plan(plan, commit=True, allow_dirty=True)  # changed since the session read it
    assert "changed since the session read it" in info.value.one_line()
    git(repo, "add", "pkg/scale.py")  # staged but not committed
    plan = _build(_plan_args(repo))
    with pytest.raises(WriteBackRefused) as info:
        apply_plan(plan, commit=True, allow_dirty=False)
    assert "uncommitted changes in pkg/scale.py" in info.value.one_line() and "--allow-dirty" in info.value.one_line()
    assert (
        "# my edit" in (repo / "pkg" / "scale.py").read_text()
        and "cuda-agent" not in (repo / "pkg" / "scale.py").read_text()
    )
    result = apply_plan(plan, commit=True, allow_dirty=True)
    assert result.commit is None and "uncommitted changes" in result.notes[0]
    text = (repo / "pkg" / "scale.py").read_text()
    assert "# my edit" in text and '["install"](Scale)' in text


def _plan_args(repo: Path, module: str = "pkg/scale.py") -> dict:
    source = (repo / module).read_text()
    return dict(
        module_file=repo / module,
        module_source=source,
        class_name="Scale",
        class_snake="scale",
        class_end=11,
        display="pkg/scale.py::Scale",
        session_id="s2",
        candidate_files={"model_new.py": MODEL_NEW, "kernels/scale.cpp": "// kernel\n"},
        binding_files={"binding.cpp": "", "binding_registry.h": ""},
        verified=verified(),
        manifest_entry={"target": "pkg/scale.py::Scale"},
        fallback_root=repo,
    )


def test_outside_a_repository_apply_needs_no_commit(tmp_path: Path):
    (tmp_path / "scale.py").write_text(MODULE)
    args = _plan_args(tmp_path, "scale.py")
    plan = _build(args)
    assert not plan.in_git
    with pytest.raises(WriteBackRefused) as info:
        apply_plan(plan, commit=True, allow_dirty=False)
    assert "not inside a git repository" in info.value.one_line() and "--no-apply" in info.value.one_line()
    assert "cuda-agent" not in (tmp_path / "scale.py").read_text()
    apply_plan(plan, commit=False, allow_dirty=False)
    assert (tmp_path / "_cuda_agent" / "scale" / "loader.py").is_file()


def test_second_apply_diffs_against_the_first_and_removes_stale_kernels(repo: Path):
    apply_plan(plan_for(repo), commit=False, allow_dirty=False)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "first")
    args = _plan_args(repo)
    args["candidate_files"] = {"model_new.py": MODEL_NEW, "kernels/other.cpp": "// v2\n"}
    plan = _build(args)
    paths = {c.path: c for c in plan.changes}
    assert paths["pkg/_cuda_agent/scale/kernels/scale.cpp"].is_deleted
    assert paths["pkg/_cuda_agent/scale/kernels/other.cpp"].is_new
    assert "pkg/scale.py" not in paths  # already integrated: unchanged
    apply_plan(plan, commit=True, allow_dirty=False)
    assert not (repo / "pkg/_cuda_agent/scale/kernels/scale.cpp").exists()


# ---------------------------------------------------------------- routing of calls (no compiler needed)


@pytest.fixture
def integrated(repo: Path, monkeypatch: pytest.MonkeyPatch):
    apply_plan(plan_for(repo), commit=False, allow_dirty=False)
    monkeypatch.syspath_prepend(str(repo))
    monkeypatch.delenv("CUDA_AGENT_DISABLE_KERNELS", raising=False)
    sys.modules.pop("pkg.scale", None)
    sys.modules.pop("pkg", None)
    import importlib

    module = importlib.import_module("pkg.scale")
    loader_globals = module.Scale.forward.__globals__
    namespace: dict = {}
    exec(compile(MODEL_NEW.replace("import cuda_extension\n", ""), "model_new", "exec"), namespace)
    loads = []

    def fake_load():
        loads.append(1)
        return namespace["ModelNew"]

    monkeypatch.setitem(loader_globals, "_load_new_class", fake_load)
    yield module, loads, loader_globals
    sys.modules.pop("pkg.scale", None)
    sys.modules.pop("pkg", None)


def test_verified_calls_use_the_kernel_and_everything_else_the_original(integrated):
    module, loads, _ = integrated
    m = module.Scale(8)
    x = torch.randn(4, 8)
    expected = x * m.w.detach()
    with torch.no_grad():
        assert torch.allclose(m(x), expected + 1000)  # the kernel path
        assert torch.allclose(m(x=x), expected + 1000)  # keyword call binds the same
        assert torch.allclose(m(x, alpha=1.0), expected + 1000)  # explicit default value
        assert torch.allclose(m(x, alpha=2.0), expected * 2)  # a value never verified
        assert torch.allclose(m(torch.randn(3, 8)).abs().mean() < 100, torch.tensor(True))  # other shape
        assert m(x.double()).dtype == torch.float64  # other dtype
        xt = torch.randn(8, 4).t()
        assert torch.allclose(m(xt), xt * m.w)  # not contiguous
        assert torch.allclose(m.double()(x.double()), x.double() * m.w)  # parameters of another dtype
    assert len(loads) == 1
    m2 = module.Scale(8)
    y = m2(x)  # autograd: the kernel runs the forward, the original code's backward follows
    assert torch.allclose(y, x * m2.w + 1000) and y.requires_grad
    y.sum().backward()
    assert torch.allclose(m2.w.grad, x.sum(0))

    class Sub(module.Scale):
        pass

    with torch.no_grad():
        s = Sub(8)
        assert torch.allclose(s(x), x * s.w)  # subclasses keep their own path
    assert "_cuda_agent_new" not in m.state_dict() and list(m.state_dict()) == ["w"]


def test_a_kernel_that_cannot_be_built_falls_back_with_one_warning(integrated, monkeypatch):
    module, _, loader_globals = integrated

    def no_compiler():
        raise RuntimeError("ninja not found")

    monkeypatch.setitem(loader_globals, "_load_new_class", no_compiler)
    m = module.Scale(8)
    x = torch.randn(4, 8)
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert torch.allclose(m(x), x * m.w)
        assert torch.allclose(m(x), x * m.w)
    assert len([w for w in caught if "ninja not found" in str(w.message)]) == 1


def test_kernels_can_be_switched_off_by_environment(repo: Path):
    apply_plan(plan_for(repo), commit=False, allow_dirty=False)
    code = "import pkg.scale, torch; f = pkg.scale.Scale.forward; print(getattr(f, '_cuda_agent', False))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=repo,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "CUDA_AGENT_DISABLE_KERNELS": "1"},
        check=True,
    )
    assert out.stdout.strip() == "False"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=repo,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        check=True,
    )
    assert out.stdout.strip() == "True"


def test_module_hash_is_what_the_plan_checks(repo: Path):
    plan = plan_for(repo)
    assert plan.module_sha256 == hashlib.sha256((repo / "pkg" / "scale.py").read_bytes()).hexdigest()

"""Target resolution: parsing, the subprocess import from the repository, and the reference file."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cuda_agent_cli.errors import InputSpecError, TargetError
from cuda_agent_cli.task.inputs import parse_inputs_spec
from cuda_agent_cli.task.resolve import resolve_task
from cuda_agent_cli.task.target import parse_target, snake_case


def write(root: Path, rel: str, text: str) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(textwrap.dedent(text))
    return p


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)  # a repository root marker is all parse_target needs
    write(root, "pkg/__init__.py", "")
    write(
        root,
        "pkg/util.py",
        """
        import torch
        def act(x):
            return torch.nn.functional.silu(x)
    """,
    )
    write(
        root,
        "pkg/blocks.py",
        """
        import torch
        from pkg.util import act
        from . import util as _util


        class GatedNorm(torch.nn.Module):
            def __init__(self, dim, eps=1e-5):
                super().__init__()
                self.norm = torch.nn.LayerNorm(dim, eps=eps)

            def forward(self, x, scale=1.0):
                return act(self.norm(x)) * scale


        class NeedsArgs(torch.nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.w = torch.nn.Parameter(torch.ones(dim))

            def forward(self, x):
                return x * self.w


        class Broken(torch.nn.Module):
            def __init__(self):
                super().__init__()
                raise RuntimeError("no weights file")

            def forward(self, x):
                return x
    """,
    )
    write(
        root,
        "solo.py",
        """
        import torch


        class Solo(torch.nn.Module):
            def forward(self, x):
                return torch.relu(x) + 1


        def get_inputs():
            return [torch.randn(4, 8), ]
    """,
    )
    return root


def run_reference(source: str, tmp_path: Path) -> str:
    """Execute a generated model.py the way the harness does: a clean interpreter elsewhere."""
    path = tmp_path / "ref" / "model.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(source)
    code = (
        "import model, torch\n"
        "m = model.Model(*model.get_init_inputs())\n"
        "out = m(*model.get_inputs())\n"
        "print(tuple(out.shape))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=path.parent,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_snake_case():
    assert snake_case("PooledLayerNorm") == "pooled_layer_norm"
    assert snake_case("MLPBlock") == "mlp_block"


def test_parse_target_forms(repo: Path):
    t = parse_target("pkg/blocks.py::GatedNorm", repo)
    assert (t.module_name, t.class_name, t.repo_root) == ("pkg.blocks", "GatedNorm", repo)
    assert t.import_paths == (repo,)
    assert parse_target("pkg.blocks:GatedNorm", repo).module_name == "pkg.blocks"


@pytest.mark.parametrize(
    "text, words",
    [
        ("pkg/missing.py::X", "no such file"),
        ("pkg/blocks.py", "does not name a class"),
        ("pkg/blocks.py::not valid", "not a valid target"),
        ("pkg/__init__.py::", "not a valid target"),
    ],
)
def test_parse_target_errors(repo: Path, text: str, words: str):
    with pytest.raises(TargetError) as info:
        parse_target(text, repo)
    assert words in info.value.one_line() and info.value.exit_code == 2


def test_class_that_needs_its_package_is_imported_by_absolute_path(repo: Path, tmp_path: Path):
    spec = parse_inputs_spec("x=float32[4,64], scale=2.0; init: 64, eps=1e-6")
    task = resolve_task("pkg/blocks.py::GatedNorm", repo, inputs=spec)
    assert not task.standalone
    assert task.forward_params == ("x", "scale")
    # scale sits in signature order, so it travels positionally
    assert [a.name for a in task.call.args] == [None, None]
    assert task.parameters == (("norm.weight", "float32", (64,)), ("norm.bias", "float32", (64,)))
    assert str(repo) in task.reference_source and "from pkg.blocks import GatedNorm" in task.reference_source
    assert "# class GatedNorm(torch.nn.Module):" in task.reference_source
    assert run_reference(task.reference_source, tmp_path) == "(4, 64)"


def test_self_contained_module_is_copied_with_its_own_get_inputs(repo: Path, tmp_path: Path):
    task = resolve_task("solo.py::Solo", repo)
    assert task.standalone and task.uses_module_inputs
    assert task.call.describe() == "float32[4,8]" and task.call.source == "get_inputs"
    assert task.reference_source.lstrip().startswith("import torch\n\n\nclass Solo")
    assert "class Model(Solo)" in task.reference_source
    assert run_reference(task.reference_source, tmp_path) == "(4, 8)"


def test_dotted_target_and_keyword_only_inputs(repo: Path, tmp_path: Path):
    spec = parse_inputs_spec("scale=3.0, x=float32[2,64]; init: 64")
    task = resolve_task("pkg.blocks:GatedNorm", repo, inputs=spec)
    assert task.file == (repo / "pkg" / "blocks.py").resolve()
    assert "_KEYWORDS = ['scale', 'x']" in task.reference_source
    assert run_reference(task.reference_source, tmp_path) == "(2, 64)"


def test_missing_class_lists_the_modules_classes(repo: Path):
    with pytest.raises(TargetError) as info:
        resolve_task("pkg/blocks.py::Nope", repo, inputs=parse_inputs_spec("x=float32[2]"))
    line = info.value.one_line()
    assert "has no class `Nope`" in line and "GatedNorm" in line and "NeedsArgs" in line


def test_class_that_fails_to_construct(repo: Path):
    with pytest.raises(TargetError) as info:
        resolve_task("pkg/blocks.py::Broken", repo, inputs=parse_inputs_spec("x=float32[2]"))
    assert "fails to construct: RuntimeError: no weights file" in info.value.one_line()
    with pytest.raises(TargetError) as info:
        resolve_task("pkg/blocks.py::NeedsArgs", repo, inputs=parse_inputs_spec("x=float32[2]"))
    assert "init:" in info.value.one_line()


def test_no_way_to_make_inputs(repo: Path):
    with pytest.raises(InputSpecError) as info:
        resolve_task("pkg/blocks.py::GatedNorm", repo)
    line = info.value.one_line()
    assert "no way to make inputs" in line and "--inputs" in line and "--capture" in line


def test_import_error_of_the_users_module_is_one_line(repo: Path):
    write(repo, "bad.py", "import not_a_real_module_xyz\n")
    with pytest.raises(TargetError) as info:
        resolve_task("bad.py::X", repo, inputs=parse_inputs_spec("x=float32[2]"))
    assert "No module named 'not_a_real_module_xyz'" in info.value.one_line()

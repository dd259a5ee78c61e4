"""Constructor arguments that are objects of the user's code: config dataclasses, namedtuples,
namespaces, dicts, enum members and dtypes, from --capture, --inputs and get_init_inputs()."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from cuda_agent_cli.errors import InputSpecError
from cuda_agent_cli.task.describe import describe
from cuda_agent_cli.task.inputs import (
    Arg,
    ObjectSpec,
    call_from_json,
    call_to_json,
    parse_inputs_spec,
    value_from_json,
)
from cuda_agent_cli.task.resolve import resolve_task

CONFIG = """
    import enum
    from dataclasses import dataclass, field


    class Act(enum.Enum):
        RELU = "relu"
        TANH = "tanh"


    @dataclass
    class Cfg:
        dim: int = 16
        scale: float = 2.0
        act: Act = Act.RELU
        cache: list = field(default_factory=list, init=False)
"""

BLOCK = """
    import torch
    from torch import nn

    from ..config import Act, Cfg


    class Block(nn.Module):
        def __init__(self, cfg: Cfg, dtype=torch.float32):
            super().__init__()
            self.lin = nn.Linear(cfg.dim, cfg.dim, dtype=dtype)
            self.scale = cfg.scale
            self.act = torch.relu if cfg.act is Act.RELU else torch.tanh

        def forward(self, x):
            return self.act(self.lin(x)) * self.scale
"""

SCRIPT = """
    import torch
    from mypkg.config import Act, Cfg
    from mypkg.layers.blocks import Block

    m = Block(Cfg(dim=24, scale=0.5, act=Act.TANH), dtype=torch.float64)
    m(torch.randn(3, 24, dtype=torch.float64))
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A src-layout package whose block takes a config dataclass, as real code does."""
    root = tmp_path / "repo"
    for rel, text in {
        "src/mypkg/__init__.py": "",
        "src/mypkg/layers/__init__.py": "",
        "src/mypkg/config.py": CONFIG,
        "src/mypkg/layers/blocks.py": BLOCK,
        "train.py": SCRIPT,
    }.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def run_reference(source: str, where: Path) -> str:
    """The generated model.py, run as the harness runs it: a clean interpreter elsewhere."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "model.py").write_text(source)
    code = (
        "import model\n"
        "m = model.Model(*model.get_init_inputs())\n"
        "out = m(*model.get_inputs())\n"
        "print(tuple(out.shape), out.dtype, m.scale, m.act.__name__)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=where,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_captured_config_object_becomes_the_references_constructor_argument(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("PYTHONPATH", str(repo / "src"))  # a src layout, not installed
    task = resolve_task("src/mypkg/layers/blocks.py::Block", repo, capture_command=f"{sys.executable} train.py")
    cfg, dtype = task.call.init
    assert cfg.value == ObjectSpec(
        "mypkg.config",
        "Cfg",
        (Arg("dim", 24), Arg("scale", 0.5), Arg("act", ObjectSpec("mypkg.config", "Act.TANH", call=False))),
    )
    assert dtype == Arg("dtype", ObjectSpec("torch", "float64", call=False))
    assert (
        task.call.describe()
        == "float64[3,24]; init: Cfg(dim=24, scale=0.5, act=mypkg.config.Act.TANH), dtype=torch.float64"
    )
    assert run_reference(task.reference_source, tmp_path / "ref") == "(3, 24) torch.float64 0.5 tanh"


def test_inputs_name_objects_of_the_targets_module(repo: Path, tmp_path: Path):
    spec = parse_inputs_spec("x=float32[2,16]; init: Cfg(dim=16, act=Act.TANH)")
    task = resolve_task("src/mypkg/layers/blocks.py::Block", repo, inputs=spec)
    # bound to the module the names were looked up in, so the manifest and the loader find them
    assert task.call.init[0].value.module == "mypkg.layers.blocks"
    assert run_reference(task.reference_source, tmp_path / "ref") == "(2, 16) torch.float32 2.0 tanh"


def test_a_name_the_module_does_not_have_is_one_clear_line(repo: Path):
    spec = parse_inputs_spec("x=float32[2,16]; init: Config(dim=16)")
    with pytest.raises(Exception) as info:
        resolve_task("src/mypkg/layers/blocks.py::Block", repo, inputs=spec)
    line = info.value.one_line()  # type: ignore[attr-defined]
    assert "`Config` is not defined in mypkg.layers.blocks" in line and "--inputs" in line


def test_a_command_that_sets_pythonpath_itself_is_told_how_to_capture(repo: Path):
    with pytest.raises(InputSpecError) as info:
        resolve_task(
            "src/mypkg/layers/blocks.py::Block", repo, capture_command=f"PYTHONPATH=src {sys.executable} train.py"
        )
    assert "no Python it started loaded the recording hook" in info.value.one_line()
    assert "PYTHONPATH=src cuda-agent optimize" in info.value.one_line()


def test_the_users_own_sitecustomize_still_runs_under_capture(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nopen(os.path.join(os.getcwd(), 'site-ran'), 'w').close()\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(repo / "src")]))
    task = resolve_task("src/mypkg/layers/blocks.py::Block", repo, capture_command=f"{sys.executable} train.py")
    assert task.call.init[0].value.qualname == "Cfg"
    assert (repo / "site-ran").exists()


def test_a_config_defined_in_the_script_itself_cannot_be_rebuilt(
    tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("PYTHONPATH", str(repo / "src"))
    (repo / "train.py").write_text(
        textwrap.dedent(
            """
            import torch
            from dataclasses import dataclass
            from mypkg.layers.blocks import Block

            @dataclass
            class Local:
                dim: int = 16
                scale: float = 1.0
                act: object = None

            Block(Local())(torch.randn(2, 16))
            """
        )
    )
    with pytest.raises(InputSpecError) as info:
        resolve_task("src/mypkg/layers/blocks.py::Block", repo, capture_command=f"{sys.executable} train.py")
    assert "defined in the script itself" in info.value.one_line()


def test_describe_objects():
    import argparse
    import types
    from collections import namedtuple

    Pair = namedtuple("Pair", "a b")
    globals()["Pair"] = Pair  # importable from this module, as a module-level namedtuple is
    Pair.__module__ = __name__
    assert describe(Pair(1, 2.5), "arg") == {
        "object": {
            "module": __name__,
            "qualname": "Pair",
            "call": True,
            "args": [{"name": "a", "value": 1}, {"name": "b", "value": 2.5}],
        }
    }
    assert describe({"heads": 4}, "arg")["object"]["qualname"] == "dict"
    assert describe(argparse.Namespace(lr=0.1), "arg")["object"]["qualname"] == "Namespace"
    assert describe(types.SimpleNamespace(k=3), "arg")["object"]["module"] == "types"
    assert describe(torch.bfloat16, "arg") == {"object": {"module": "torch", "qualname": "bfloat16", "call": False}}
    with pytest.raises(TypeError, match="cannot be described"):
        describe(object(), "arg")
    from dataclasses import dataclass

    @dataclass
    class Inner:
        k: int = 1

    with pytest.raises(TypeError, match="inside a function"):
        describe(Inner(), "arg")


def test_inputs_language_for_objects_round_trips():
    spec = parse_inputs_spec(
        "x=float32[2,8]; init: cfgs.Big(d=8, inner=Small(k=(1, 2))), torch.float16, mode=Mode.FAST"
    )
    assert (
        spec.describe() == "x=float32[2,8]; init: cfgs.Big(d=8, inner=Small(k=(1, 2))), torch.float16, mode=Mode.FAST"
    )
    assert call_from_json(call_to_json(spec)) == spec
    with pytest.raises(InputSpecError):
        parse_inputs_spec("x=float32[2,8]; init: Cfg(1)(2")
    with pytest.raises(InputSpecError):
        value_from_json({"object": {"module": "m"}})

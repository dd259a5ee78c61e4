"""The deployment's one-line summary and the scan that decides whether the kernel is also timed
under torch.compile (pure: no kernel, no probe)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent_cli.writeback.deploy import Deployment, FamilyDeploy, refers_to_torch_compile, uses_torch_compile


def _family(**compiled: object) -> FamilyDeploy:
    fam = FamilyDeploy(0, patched_us=30.0, original_us=128.0, speedup=4.27, interval=(4.2, 4.3))
    for k, v in compiled.items():
        setattr(fam, k, v)
    return fam


def test_a_repository_that_compiles_its_modules_gets_the_compiled_timing(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "blocks.py").write_text("import torch\n\nclass Block(torch.nn.Module):\n    pass\n")
    assert not uses_torch_compile(tmp_path)
    (tmp_path / "pkg" / "tools.py").write_text("import torch\nfast = torch.compiler.disable(print)\n")
    assert not uses_torch_compile(tmp_path)  # torch.compiler is not torch.compile
    venv = tmp_path / ".venv" / "lib"
    venv.mkdir(parents=True)
    (venv / "x.py").write_text("m = torch.compile(m)\n")
    assert not uses_torch_compile(tmp_path)  # installed packages are not the repository's code
    # Said in a docstring, a comment or a string: not a call.
    (tmp_path / "pkg" / "notes.py").write_text(
        '"""torch.compile fuses the normalization."""\n# m = torch.compile(m)\nHINT = "try torch.compile"\n'
    )
    assert not uses_torch_compile(tmp_path)
    (tmp_path / "train.py").write_text("from pkg.blocks import Block\nmodel = torch.compile(Block())\n")
    assert uses_torch_compile(tmp_path)


@pytest.mark.parametrize(
    "source, calls",
    [
        ("import torch as th\nm = th.compile(m)\n", True),
        ("from torch import (\n    nn,\n    compile,\n)\n", True),
        ("@torch.compile\ndef f(x):\n    return x\n", True),
        ("def f(m):\n    return torch.compile(m", True),  # cut short where the scan stops reading
        ("model = Block()\nmodel.compile()\n", True),
        ("model.compile(mode='max-autotune')\n", True),
        ("import torch\nm = torch.compiler.compile(m)\n", True),
        ('"""torch.compile fuses it."""\nimport torch\n', False),
        ("import re\npattern = re.compile('torch')\n", False),
        ("import torch\nf = torch.compiler.disable(print)\n", False),
    ],
)
def test_only_code_that_names_torch_compile_counts(source: str, calls: bool) -> None:
    assert refers_to_torch_compile(source) is calls


def test_a_module_compiled_by_its_own_method_counts_too(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("from pkg.blocks import Block\nmodel = Block()\nmodel.compile()\n")
    assert uses_torch_compile(tmp_path)


def test_the_summary_says_when_the_kernel_is_slower_under_torch_compile() -> None:
    slower = Deployment(
        families=[
            _family(
                compiled_patched_us=115.0,
                compiled_original_us=76.1,
                compiled_speedup=0.72,
                compiled_interval=(0.7, 0.74),
            )
        ]
    )
    line = slower.summary(4.03)
    assert "4.27x vs eager" in line and "under torch.compile" in line and "0.72x" in line and "slower there" in line
    assert slower.manifest()["speedup_compiled"] == 0.72
    assert slower.to_json()["families"][0]["compiled"]["speedup_per_call"] == 0.72

    faster = Deployment(
        families=[
            _family(
                compiled_patched_us=30.0, compiled_original_us=60.0, compiled_speedup=2.0, compiled_interval=(1.9, 2.1)
            )
        ]
    )
    assert "2.00x" in faster.summary(4.03) and "slower there" not in faster.summary(4.03)

    plain = Deployment(families=[_family()])
    assert "torch.compile" not in plain.summary(4.03) and "speedup_compiled" not in plain.manifest()
    assert plain.to_json()["families"][0]["compiled"] is None

    failed = Deployment(families=[_family(compiled_error="BackendCompilerFailed: no compiler")])
    assert "could not be timed here" in failed.summary(4.03)


def test_check_shows_the_recorded_speedup_under_torch_compile_beside_the_per_call_one(tmp_path: Path) -> None:
    from cuda_agent_cli.check.report import table
    from cuda_agent_cli.check.runner import CheckReport, KernelReport, Status, _recorded

    entry = {"speedup_vs_eager": 4.0, "speedup_per_call": 4.27, "speedup_compiled": 0.72, "unrelated": 1}
    kept = _recorded(entry)
    assert kept["speedup_compiled"] == 0.72 and "unrelated" not in kept

    def row(recorded: dict) -> str:
        k = KernelReport("vit_head.py::PooledLayerNorm", "cuda", Status.OK, [], None, None, recorded)
        return table(CheckReport(tmp_path, None, "fast", 0.9, False, [k]))[1]

    assert row(kept).rstrip().endswith("4.27x, compiled 0.72x")
    assert row({"speedup_per_call": 4.27}).rstrip().endswith("4.27x")

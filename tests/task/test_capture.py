"""--capture: the user's own command runs, and its calls to the class are counted by signature."""

import sys
import textwrap
from pathlib import Path

import pytest

from cuda_agent_cli.errors import InputSpecError
from cuda_agent_cli.task.capture import capture_call, capture_calls
from cuda_agent_cli.task.inputs import Arg, TensorSpec
from cuda_agent_cli.task.resolve import resolve_task

BLOCK = """
    import torch


    class Mixer(torch.nn.Module):
        def __init__(self, dim, heads=4):
            super().__init__()
            self.proj = torch.nn.Linear(dim, dim)

        def forward(self, x, ids, scale=1.0):
            return self.proj(x) * scale + ids.float().unsqueeze(-1)
"""

SCRIPT = """
    import torch
    from lib.mixer import Mixer

    m = Mixer(32, heads=2)
    for step in range(3):
        m(torch.randn(2, 5, 32), torch.arange(10).reshape(2, 5) + 3, scale=0.5)
    print("training finished")
    open("finished.txt", "w").write("x")
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "__init__.py").write_text("")
    (tmp_path / "lib" / "mixer.py").write_text(textwrap.dedent(BLOCK))
    (tmp_path / "train.py").write_text(textwrap.dedent(SCRIPT))
    return tmp_path


def test_calls_are_counted_by_signature_while_the_command_runs(project: Path):
    captured = capture_calls(f"{sys.executable} train.py", project / "lib" / "mixer.py", "Mixer", project)
    ((spec, count),) = captured.calls
    assert count == 3 and captured.total == 3 and captured.left_out == 0
    assert spec.source == "capture"
    assert spec.init == (Arg(None, 32), Arg("heads", 2))
    assert spec.args[0] == Arg(None, TensorSpec("float32", (2, 5, 32)))
    assert spec.args[1] == Arg(None, TensorSpec("int64", (2, 5), None, 3, 13))
    assert spec.args[2] == Arg("scale", 0.5)
    assert (project / "finished.txt").exists()  # the command ran as it would without cuda-agent


def test_several_signatures_most_frequent_first_and_integer_ranges_widened(project: Path):
    (project / "shapes.py").write_text(
        textwrap.dedent("""
        import torch
        from lib.mixer import Mixer

        a, b = Mixer(32), Mixer(16, heads=1)
        for i in range(2):
            a(torch.randn(2, 5, 32), torch.arange(10).reshape(2, 5) + i, scale=0.5)
        for _ in range(5):
            a(torch.randn(4, 5, 32), torch.zeros(4, 5, dtype=torch.long))
        b(torch.randn(1, 3, 16), torch.ones(1, 3, dtype=torch.long))
    """)
    )
    captured = capture_calls(f"{sys.executable} shapes.py", project / "lib" / "mixer.py", "Mixer", project)
    assert [n for _, n in captured.calls] == [5, 2, 1]
    first, second, third = (c for c, _ in captured.calls)
    assert first.args[0].value.shape == (4, 5, 32) and first.init == (Arg(None, 32),)
    assert second.args[1].value == TensorSpec("int64", (2, 5), None, 0, 11)  # the union of both calls' values
    assert third.init == (Arg(None, 16), Arg("heads", 1))


def test_a_long_command_is_stopped_after_enough_calls(project: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CUDA_AGENT_CAPTURE_CALLS", "2")
    captured = capture_calls(f"{sys.executable} train.py", project / "lib" / "mixer.py", "Mixer", project)
    assert captured.total == 2 and captured.calls[0][1] == 2
    assert not (project / "finished.txt").exists()


def test_captured_inputs_feed_the_task(project: Path):
    task = resolve_task("lib/mixer.py::Mixer", project, capture_command=f"{sys.executable} train.py")
    assert task.call.describe() == "float32[2,5,32], int64[2,5] 3..13, 0.5; init: 32, heads=2"
    assert "torch.randint(3, 13, (2, 5), dtype=torch.int64)" in task.reference_source


def test_command_that_never_calls_the_class(project: Path):
    (project / "other.py").write_text("print('hello')\n")
    with pytest.raises(InputSpecError) as info:
        capture_call(f"{sys.executable} other.py", project / "lib" / "mixer.py", "Mixer", project)
    assert "exited with 0: hello" in info.value.one_line() and "without calling Mixer.forward" in info.value.one_line()


def test_command_that_fails(project: Path):
    (project / "crash.py").write_text("raise SystemExit('bad config file')\n")
    with pytest.raises(InputSpecError) as info:
        capture_call(f"{sys.executable} crash.py", project / "lib" / "mixer.py", "Mixer", project)
    assert "exited with 1: bad config file" in info.value.one_line()


def test_argument_that_cannot_be_described(project: Path):
    (project / "odd.py").write_text(
        textwrap.dedent("""
        import torch
        from lib.mixer import Mixer
        Mixer(8)(torch.randn(1, 8), torch.zeros(1, dtype=torch.long), scale=object())
    """)
    )
    with pytest.raises(InputSpecError) as info:
        capture_call(f"{sys.executable} odd.py", project / "lib" / "mixer.py", "Mixer", project)
    assert "forward argument 'scale' is a builtins.object" in info.value.one_line()

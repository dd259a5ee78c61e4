"""Read, Write, Edit, MultiEdit: semantics, errors, and the write rules on resolved paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cuda_agent_cli.actions import ActionContext, Toolbox, make_toolbox
from cuda_agent_cli.actions.paths import PathRefused, check_read, check_write
from cuda_agent_cli.sandbox import Sandbox, SandboxPolicy, SandboxStatus

LOCKED = ["model.py", "binding.cpp", "binding_registry.h", "SKILL.md"]


@pytest.fixture
def tb(tmp_path: Path) -> Toolbox:
    ws = tmp_path / "ws"
    (ws / "kernels").mkdir(parents=True)
    for name in LOCKED:
        (ws / name).write_text(f"# pristine {name}\n")
    (ws / "model_new.py").write_text("import torch\n\nclass ModelNew:\n    pass\n")
    pol = SandboxPolicy.optimize(ws, LOCKED, sandbox_uid=None, sandbox_gid=None)
    sb = Sandbox(pol, SandboxStatus(False, "unit tests run unconfined"), enabled=False)
    sb.prepare()
    return make_toolbox(ActionContext(sb))


def root(tb: Toolbox) -> Path:
    return tb.ctx.root


# --- Read ---------------------------------------------------------------------------------------


def test_read_numbers_lines_like_cat_n(tb: Toolbox) -> None:
    r = tb.call("Read", {"file_path": "model_new.py"})
    assert not r.is_error
    assert r.output.splitlines() == ["     1\timport torch", "     2\t", "     3\tclass ModelNew:", "     4\t    pass"]


def test_read_offset_and_limit_page_through_a_long_file(tb: Toolbox) -> None:
    (root(tb) / "kernels" / "long.cu").write_text("".join(f"line {i}\n" for i in range(1, 2501)))
    first = tb.call("Read", {"file_path": "kernels/long.cu"})
    assert "  2000\tline 2000" in first.output and "line 2001" not in first.output
    assert "use offset=2001" in first.output
    page = tb.call("Read", {"file_path": "kernels/long.cu", "offset": 2400, "limit": 3})
    assert page.output.splitlines()[:3] == ["  2400\tline 2400", "  2401\tline 2401", "  2402\tline 2402"]
    past = tb.call("Read", {"file_path": "kernels/long.cu", "offset": 9999})
    assert past.is_error and "2500 lines" in past.output


def test_read_shortens_very_long_lines(tb: Toolbox) -> None:
    (root(tb) / "kernels" / "wide.cu").write_text("x" * 5000 + "\n")
    r = tb.call("Read", {"file_path": "kernels/wide.cu"})
    assert "3000 more characters" in r.output and len(r.output) < 2200


def test_read_errors_say_what_to_do(tb: Toolbox) -> None:
    missing = tb.call("Read", {"file_path": "model_nwe.py"})
    assert missing.is_error and "does not exist" in missing.output and "model_new.py" in missing.output
    assert "is a directory" in tb.call("Read", {"file_path": "kernels"}).output
    (root(tb) / "kernels" / "blob.bin").write_bytes(b"\x7fELF\x00\x00\x01")
    assert "binary" in tb.call("Read", {"file_path": "kernels/blob.bin"}).output
    (root(tb) / "kernels" / "empty.cu").write_text("")
    empty = tb.call("Read", {"file_path": "kernels/empty.cu"})
    assert not empty.is_error and "empty" in empty.output


def test_read_accepts_absolute_paths_and_refuses_secrets(tb: Toolbox) -> None:
    assert not tb.call("Read", {"file_path": str(root(tb) / "model.py")}).is_error
    for secret in ("/proc/self/environ", "/root/.bashrc", "/root/.ssh/id_rsa"):
        r = tb.call("Read", {"file_path": secret})
        assert r.is_error, secret


# --- Write --------------------------------------------------------------------------------------


def test_write_creates_kernels_with_parents_and_overwrites(tb: Toolbox) -> None:
    r = tb.call("Write", {"file_path": "kernels/sub/add.cu", "content": "a\nb\n"})
    assert not r.is_error and "Created kernels/sub/add.cu (2 lines)" in r.output
    assert (root(tb) / "kernels/sub/add.cu").read_text() == "a\nb\n"
    r = tb.call("Write", {"file_path": "kernels/sub/add.cu", "content": "c\n"})
    assert "Updated" in r.output and (root(tb) / "kernels/sub/add.cu").read_text() == "c\n"
    assert not tb.call("Write", {"file_path": "model_new.py", "content": "class ModelNew: ...\n"}).is_error
    assert not tb.call("Write", {"file_path": "scratch/notes.md", "content": "plan\n"}).is_error


@pytest.mark.parametrize(
    "path,reason",
    [
        ("model.py", "locked"),
        ("binding_registry.h", "locked"),
        ("SKILL.md", "locked"),
        ("kernels/../model.py", "locked"),
        ("setup.py", "only kernels, model_new.py, scratch"),
        ("../escape.txt", "outside"),
        ("/etc/cuda-agent-test", "outside"),
    ],
)
def test_write_refuses_everything_outside_the_writable_areas(tb: Toolbox, path: str, reason: str) -> None:
    r = tb.call("Write", {"file_path": path, "content": "pwned"})
    assert r.is_error and reason in r.output, r.output
    assert "pwned" not in (root(tb) / "model.py").read_text()
    assert not (root(tb).parent / "escape.txt").exists()


def test_write_through_symlinks_is_judged_by_the_target(tb: Toolbox, tmp_path: Path) -> None:
    ws = root(tb)
    os.symlink("../model.py", ws / "kernels" / "to_model.py")
    os.symlink(str(tmp_path), ws / "kernels" / "to_outside")
    os.symlink("ok.cu", ws / "kernels" / "alias.cu")
    assert "locked" in tb.call("Write", {"file_path": "kernels/to_model.py", "content": "x"}).output
    assert tb.call("Write", {"file_path": "kernels/to_outside/f.txt", "content": "x"}).is_error
    assert not (tmp_path / "f.txt").exists()
    # a link that stays inside kernels/ is fine
    assert not tb.call("Write", {"file_path": "kernels/alias.cu", "content": "ok"}).is_error
    assert (ws / "kernels" / "ok.cu").read_text() == "ok"


def test_a_renamed_parent_cannot_smuggle_a_write(tb: Toolbox, tmp_path: Path) -> None:
    ws = root(tb)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (ws / "kernels").rename(ws / "kernels.real")
    os.symlink(str(outside), ws / "kernels")
    r = tb.call("Write", {"file_path": "kernels/k.cu", "content": "x"})
    assert r.is_error and not (outside / "k.cu").exists()


def test_a_hard_link_to_a_locked_file_is_refused(tb: Toolbox) -> None:
    ws = root(tb)
    os.link(ws / "model.py", ws / "kernels" / "hard.py")
    r = tb.call("Write", {"file_path": "kernels/hard.py", "content": "pwned"})
    assert r.is_error and "hard link" in r.output
    assert "pwned" not in (ws / "model.py").read_text()


def test_repository_rules_allow_the_tree_but_not_git(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    pol = SandboxPolicy.repository(repo)
    assert check_write("src/new.py", pol) == pol.root / "src/new.py"
    with pytest.raises(PathRefused, match="protected"):
        check_write(".git/config", pol)
    with pytest.raises(PathRefused):
        check_write("../other/x.py", pol)


def test_read_rules_allow_toolchain_headers_but_not_home(tb: Toolbox) -> None:
    import sysconfig

    inc = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if inc.exists():
        assert check_read(str(inc), tb.ctx.policy) == inc.resolve()
    with pytest.raises(PathRefused):
        check_read("/root/.config/anything", tb.ctx.policy)


# --- Edit ---------------------------------------------------------------------------------------


def test_edit_replaces_a_unique_match_and_shows_the_result(tb: Toolbox) -> None:
    r = tb.call(
        "Edit",
        {
            "file_path": "model_new.py",
            "old_string": "    pass",
            "new_string": "    def forward(self, x):\n        return x",
        },
    )
    assert not r.is_error and "1 occurrence" in r.output and "def forward" in r.output
    assert "return x" in (root(tb) / "model_new.py").read_text()


def test_edit_refuses_an_ambiguous_match_and_lists_the_lines(tb: Toolbox) -> None:
    (root(tb) / "kernels" / "k.cu").write_text("int a = 0;\nint b = 0;\nint c = 0;\n")
    r = tb.call("Edit", {"file_path": "kernels/k.cu", "old_string": " = 0;", "new_string": " = 1;"})
    assert r.is_error and "occurs 3 times" in r.output and "lines 1, 2, 3" in r.output
    assert (root(tb) / "kernels" / "k.cu").read_text().count("= 0") == 3
    r = tb.call(
        "Edit", {"file_path": "kernels/k.cu", "old_string": " = 0;", "new_string": " = 1;", "replace_all": True}
    )
    assert not r.is_error and "3 occurrences" in r.output
    assert (root(tb) / "kernels" / "k.cu").read_text() == "int a = 1;\nint b = 1;\nint c = 1;\n"


def test_edit_miss_points_at_the_closest_region_with_line_numbers(tb: Toolbox) -> None:
    body = "".join(f"// filler {i}\n" for i in range(40))
    body += "__global__ void relu(float* x, int n) {\n  int i = threadIdx.x;\n}\n"
    (root(tb) / "kernels" / "relu.cu").write_text(body)
    r = tb.call(
        "Edit",
        {
            "file_path": "kernels/relu.cu",
            "old_string": "__global__ void relu(float *x, int n) {\n  int i = threadIdx.y;",
            "new_string": "X",
        },
    )
    assert r.is_error and "was not found" in r.output
    assert "lines 41-42" in r.output and "    41\t__global__ void relu(float* x, int n) {" in r.output


def test_edit_miss_says_when_only_whitespace_differs(tb: Toolbox) -> None:
    r = tb.call("Edit", {"file_path": "model_new.py", "old_string": "class ModelNew:\n  pass", "new_string": "x"})
    assert r.is_error and "whitespace" in r.output


def test_edit_other_errors(tb: Toolbox) -> None:
    same = tb.call("Edit", {"file_path": "model_new.py", "old_string": "pass", "new_string": "pass"})
    assert same.is_error and "identical" in same.output
    missing = tb.call("Edit", {"file_path": "kernels/none.cu", "old_string": "a", "new_string": "b"})
    assert missing.is_error and "does not exist" in missing.output
    locked = tb.call("Edit", {"file_path": "model.py", "old_string": "pristine", "new_string": "x"})
    assert locked.is_error and "locked" in locked.output


def test_edit_with_empty_old_string_creates_a_file(tb: Toolbox) -> None:
    r = tb.call("Edit", {"file_path": "kernels/new.cu", "old_string": "", "new_string": "// new\n"})
    assert not r.is_error and (root(tb) / "kernels" / "new.cu").read_text() == "// new\n"


def test_edit_keeps_crlf_line_endings(tb: Toolbox) -> None:
    p = root(tb) / "kernels" / "win.cpp"
    p.write_bytes(b"int a;\r\nint b;\r\n")
    assert not tb.call(
        "Edit", {"file_path": "kernels/win.cpp", "old_string": "int b;", "new_string": "int c;"}
    ).is_error
    assert p.read_bytes() == b"int a;\r\nint c;\r\n"


# --- MultiEdit ----------------------------------------------------------------------------------


def test_multiedit_applies_in_order(tb: Toolbox) -> None:
    r = tb.call(
        "MultiEdit",
        {
            "file_path": "model_new.py",
            "edits": [
                {"old_string": "class ModelNew:", "new_string": "class ModelNew(torch.nn.Module):"},
                {"old_string": "torch.nn.Module", "new_string": "nn.Module"},
                {"old_string": "import torch", "new_string": "import torch\nfrom torch import nn"},
            ],
        },
    )
    assert not r.is_error and "Applied 3 edits" in r.output
    assert (
        root(tb) / "model_new.py"
    ).read_text() == "import torch\nfrom torch import nn\n\nclass ModelNew(nn.Module):\n    pass\n"


def test_multiedit_is_atomic(tb: Toolbox) -> None:
    before = (root(tb) / "model_new.py").read_text()
    r = tb.call(
        "MultiEdit",
        {
            "file_path": "model_new.py",
            "edits": [
                {"old_string": "import torch", "new_string": "import numpy"},
                {"old_string": "does not exist", "new_string": "x"},
            ],
        },
    )
    assert r.is_error and "edit 2 of 2 failed" in r.output and "no edit was applied" in r.output
    assert (root(tb) / "model_new.py").read_text() == before


def test_multiedit_can_create_a_file(tb: Toolbox) -> None:
    r = tb.call(
        "MultiEdit",
        {
            "file_path": "kernels/m.cu",
            "edits": [{"old_string": "", "new_string": "int a = 0;\n"}, {"old_string": "0", "new_string": "1"}],
        },
    )
    assert not r.is_error and (root(tb) / "kernels" / "m.cu").read_text() == "int a = 1;\n"


def test_read_refuses_devices_and_pipes(tb: Toolbox) -> None:
    fifo = root(tb) / "kernels" / "pipe"
    os.mkfifo(fifo)
    assert "not a regular file" in tb.call("Read", {"file_path": "kernels/pipe"}).output
    assert "not a regular file" in tb.call("Read", {"file_path": "/dev/zero"}).output


def test_reads_never_follow_a_link_swapped_in_after_the_check(tb: Toolbox, tmp_path: Path) -> None:
    from cuda_agent_cli.actions.paths import read_bytes_nofollow

    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET")
    ws = root(tb)
    real = ws / "kernels" / "a.cu"
    real.write_text("ok")
    assert read_bytes_nofollow(real, 1 << 20) == b"ok"
    # what a racing shell could do between check_read and the open
    real.unlink()
    os.symlink(secret, real)
    with pytest.raises(PathRefused):
        read_bytes_nofollow(real, 1 << 20)
    (ws / "kernels" / "sub").mkdir()
    os.rename(ws / "kernels" / "sub", ws / "kernels" / "sub.old")
    os.symlink(tmp_path, ws / "kernels" / "sub")
    with pytest.raises(PathRefused):
        read_bytes_nofollow(ws / "kernels" / "sub" / "secret.txt", 1 << 20)

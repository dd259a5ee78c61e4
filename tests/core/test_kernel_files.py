"""KernelFiles: the one rule every reader of a kernel folder applies (model_new.py and the kernel
sources directly in kernels/; no links, dot files, caches, sub-folders or other suffixes)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cuda_agent_cli.kernel_files import KERNEL_SUFFIXES, KernelFiles, is_kernel_name

TOOLS = Path(__file__).resolve().parents[2] / "tools"


def folder(root: Path) -> Path:
    """A kernel folder with everything the rule must leave out beside two kernel files."""
    (root / "kernels" / "__pycache__").mkdir(parents=True)
    (root / "model_new.py").write_text("class ModelNew: ...\n")
    (root / "kernels" / "add.cu").write_text("// add\n")
    (root / "kernels" / "add.h").write_text("// header\n")
    (root / "kernels" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"pyc")
    (root / "kernels" / ".keep").write_text("")
    (root / "kernels" / ".hidden.cu").write_text("// dot file\n")
    (root / "kernels" / "notes.txt").write_text("notes\n")
    (root / "kernels" / "add.o").write_bytes(b"\0obj")
    (root / "kernels" / "sub").mkdir()
    (root / "kernels" / "sub" / "deep.cu").write_text("// not built\n")
    (root / "scratch").mkdir()
    (root / "scratch" / "try.cu").write_text("// scratch\n")
    outside = root.parent / f"{root.name}-outside.cu"
    outside.write_text("// somewhere else\n")
    (root / "kernels" / "linked.cu").symlink_to(outside)
    return root


def test_read_keeps_model_new_and_the_kernel_sources_only(tmp_path: Path) -> None:
    files = KernelFiles.read(folder(tmp_path / "k"))
    assert list(files.files) == ["model_new.py", "kernels/add.cu", "kernels/add.h"]
    assert files.model_new == "class ModelNew: ...\n"
    assert files.kernels == {"add.cu": "// add\n", "add.h": "// header\n"}
    assert files.texts()["kernels/add.cu"] == "// add\n"
    assert files.sources() == {"kernels/add.cu": "// add\n", "kernels/add.h": "// header\n"}


def test_a_symbolic_link_is_never_followed(tmp_path: Path) -> None:
    root = tmp_path / "k"
    (root / "kernels").mkdir(parents=True)
    target = tmp_path / "real.py"
    target.write_text("class ModelNew: ...\n")
    (root / "model_new.py").symlink_to(target)
    assert not KernelFiles.read(root)
    # A linked kernels/ folder is not read either, nor written through.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "k.cu").write_text("// k\n")
    (root / "kernels").rmdir()
    (root / "kernels").symlink_to(elsewhere, target_is_directory=True)
    assert not KernelFiles.read(root)
    KernelFiles.from_sources("class ModelNew: ...\n", {"mine.cu": "// mine\n"}).write(root)
    assert not (root / "kernels").is_symlink() and (root / "kernels" / "mine.cu").is_file()
    assert not (root / "model_new.py").is_symlink() and target.read_text() == "class ModelNew: ...\n"
    assert sorted(p.name for p in elsewhere.iterdir()) == ["k.cu"]


def test_the_suffixes_are_the_builds(tmp_path: Path) -> None:
    """The rule keeps what the locked build compiles or includes, and nothing else."""
    text = (TOOLS / "compile_kernels.py").read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("KERNEL_SUFFIXES"))
    assert set(eval(line.split("=", 1)[1])) == set(KERNEL_SUFFIXES)
    for suffix in KERNEL_SUFFIXES:
        assert is_kernel_name(f"k{suffix}")
    for name in (".keep", ".k.cu", "k.o", "k.so", "k.py", "k.txt", "__pycache__", "k"):
        assert not is_kernel_name(name), name


def test_of_keeps_the_same_paths_as_read(tmp_path: Path) -> None:
    given = {
        "model_new.py": "m",
        "kernels/a.cpp": "a",
        "kernels/.keep": "",
        "kernels/__pycache__/a.pyc": b"pyc",
        "kernels/sub/b.cu": "b",
        "kernels/c.txt": "c",
        "scratch/x.cu": "x",
        "binding.cpp": "b",
    }
    files = KernelFiles.of(given)
    assert files.files == {"model_new.py": b"m", "kernels/a.cpp": b"a"}
    assert KernelFiles.from_sources("m", {"a.cpp": "a", ".keep": "", "sub/b.cu": "b"}) == files


def test_the_digest_is_the_files_and_their_names(tmp_path: Path) -> None:
    root = folder(tmp_path / "k")
    first = KernelFiles.read(root).digest()
    assert KernelFiles().digest() is None
    (root / "kernels" / "add.o").write_bytes(b"\0changed")
    (root / "kernels" / "__pycache__" / "y.pyc").write_bytes(b"pyc")
    assert KernelFiles.read(root).digest() == first
    (root / "kernels" / "add.cu").rename(root / "kernels" / "plus.cu")
    assert KernelFiles.read(root).digest() != first


def test_write_makes_the_folder_hold_exactly_these_files(tmp_path: Path) -> None:
    root = folder(tmp_path / "k")
    keep = root / "kernels" / "add.h"
    os.utime(keep, (1, 1))
    KernelFiles.of({"model_new.py": "new\n", "kernels/add.h": "// header\n", "kernels/b.cpp": "// b\n"}).write(root)
    assert KernelFiles.read(root).files == {
        "model_new.py": b"new\n",
        "kernels/add.h": b"// header\n",
        "kernels/b.cpp": b"// b\n",
    }
    assert keep.stat().st_mtime == 1  # unchanged content is not rewritten (the build keeps its objects)
    left = sorted(p.name for p in (root / "kernels").iterdir())
    assert left == [".hidden.cu", ".keep", "add.h", "b.cpp"]  # dot files only hold the folder
    assert (root / "scratch" / "try.cu").is_file()  # outside the candidate: not touched
    KernelFiles().write(root)
    assert not (root / "model_new.py").exists() and not KernelFiles.read(root)


def test_snapshot_is_exactly_the_files(tmp_path: Path) -> None:
    files = KernelFiles.read(folder(tmp_path / "k"))
    dest = tmp_path / "best"
    dest.mkdir()
    (dest / "stale.txt").write_text("old")
    assert files.snapshot(dest) == dest
    got = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert got == ["kernels/add.cu", "kernels/add.h", "model_new.py"]
    assert KernelFiles.read(dest) == files
    assert not dest.with_name("best.tmp").exists() and not dest.with_name("best.old").exists()


@pytest.mark.parametrize("reader", ["snapshot", "bench", "judging"])
def test_every_reader_skips_what_the_build_skips(tmp_path: Path, reader: str) -> None:
    """The session's best snapshot, a bench solution and the workspace a kernel is judged in (check,
    a session's further calls) hold the same files."""
    root = folder(tmp_path / "k")
    want = KernelFiles.read(root).files
    if reader == "snapshot":
        from cuda_agent_cli.workspace import candidate_digest

        assert candidate_digest(root) == KernelFiles(want).digest()
        got = KernelFiles.read(KernelFiles.read(root).snapshot(tmp_path / "best")).files
    elif reader == "bench":
        from cuda_agent_cli.bench.solutions import Sample

        sample = Sample(level=1, problem_id=1, index=0, kind="workdir", path=root)
        got = sample.files()
    else:
        from cuda_agent_cli.workspace import judging_workspace

        (tmp_path / "cache").mkdir()
        ws = judging_workspace(tmp_path / "cache", "class Model: ...\n", KernelFiles.read(root), "cpu", "strict")
        got = KernelFiles.read(ws.root).files
    assert got == want

"""Workspaces: template copy, locked files and their hashes, external directories."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent_cli.errors import WorkspaceError
from cuda_agent_cli.workspace import (
    create_workspace,
    external_workspace,
    open_workspace,
    pair_workspace,
)

REF = (
    "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
    "def get_inputs():\n    return [torch.randn(4)]\n"
)


def test_create_workspace_lays_out_workspace_store_and_build(tmp_path: Path) -> None:
    ws = create_workspace(tmp_path / "s", REF, candidate_source="# mine\n", kernels={"add.cpp": "// k\n"})
    assert ws.root == tmp_path / "s" / "workspace" and ws.build_dir == tmp_path / "s" / "build"
    names = {p.name for p in ws.root.iterdir()}
    assert {"model.py", "model_new.py", "binding.cpp", "binding_registry.h", "kernels"} <= names
    assert "__init__.py" not in names and "__pycache__" not in names
    assert (ws.root / "kernels" / "add.cpp").read_text() == "// k\n"
    # The harness builds and runs the pristine copies in store/, never the workspace ones.
    assert ws.reference == tmp_path / "s" / "store" / "model.py" and ws.reference.read_text() == REF
    assert ws.binding_dir == tmp_path / "s" / "store"
    assert {"model.py", "binding.cpp", "binding_registry.h"} <= set(ws.locked)
    assert (ws.root / "model.py").stat().st_mode & 0o222 == 0
    assert ws.lock_violations() == []


def test_lock_violations_name_modified_removed_and_linked_files(tmp_path: Path) -> None:
    ws = create_workspace(tmp_path / "s", REF)
    model = ws.root / "model.py"
    model.chmod(0o644)
    model.write_text(REF + "# tampered\n")
    (ws.root / "binding.cpp").unlink()
    (ws.root / "binding_registry.h").unlink()
    (ws.root / "binding_registry.h").symlink_to(ws.store / "binding_registry.h")
    problems = open_workspace(tmp_path / "s").lock_violations()
    assert problems == [
        "binding.cpp was removed",
        "binding_registry.h was replaced by a symbolic link",
        "model.py was modified",
    ]


def test_create_workspace_refuses_an_existing_session(tmp_path: Path) -> None:
    create_workspace(tmp_path / "s", REF)
    with pytest.raises(WorkspaceError):
        create_workspace(tmp_path / "s", REF)


def test_external_directories_build_outside_themselves(tmp_path: Path, harness_cache: Path) -> None:
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "model.py").write_text(REF)
    (kb / "model_new.py").write_text("")
    ws = external_workspace(kb)
    assert ws.kind == "kernelbench" and ws.reference == kb / "model.py" and ws.locked == {}
    assert harness_cache in ws.build_dir.parents and kb not in ws.build_dir.parents
    (kb / "binding.cpp").write_text("")
    (kb / "binding_registry.h").write_text("")
    assert external_workspace(kb).kind == "workdir"
    assert pair_workspace(kb / "model.py", kb / "model_new.py").kind == "workdir"


@pytest.mark.parametrize(
    "layout, message",
    [
        ({}, "does not exist"),
        ({"model.py": REF}, "has no model_new.py"),
        ({"model_new.py": ""}, "has no model.py"),
    ],
)
def test_external_workspace_errors_say_what_is_missing(tmp_path: Path, layout: dict, message: str) -> None:
    target = tmp_path / "w"
    if layout:
        target.mkdir()
        for name, text in layout.items():
            (target / name).write_text(text)
    with pytest.raises(WorkspaceError, match=message):
        external_workspace(target)


def test_candidate_digest_is_the_kernel_sources_and_nothing_else(tmp_path: Path) -> None:
    from cuda_agent_cli.workspace import candidate_digest

    root = tmp_path / "ws"
    (root / "kernels").mkdir(parents=True)
    assert candidate_digest(root) is None
    (root / "model_new.py").write_text("class ModelNew: ...\n")
    (root / "kernels" / "k.cu").write_text("// v1\n")
    first = candidate_digest(root)
    # Build outputs, caches, dot files and other files of the workspace are not the kernel.
    (root / "kernels" / "k.o").write_bytes(b"\0obj")
    (root / "kernels" / "__pycache__").mkdir()
    (root / "kernels" / "__pycache__" / "x.pyc").write_bytes(b"pyc")
    (root / "kernels" / ".keep").write_text("")
    (root / "scratch.txt").write_text("notes")
    assert candidate_digest(root) == first
    (root / "kernels" / "k.cu").write_text("// v2\n")
    assert candidate_digest(root) not in (None, first)
    (root / "kernels" / "k.cu").write_text("// v1\n")
    assert candidate_digest(root) == first
    (root / "kernels" / "k.cu").rename(root / "kernels" / "j.cu")  # the same text under another name
    assert candidate_digest(root) != first

"""Paths a session writes at its end, checked at its start."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent_cli import preflight
from cuda_agent_cli.errors import BadInput


def test_a_new_patch_file_in_the_current_folder_is_fine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    assert preflight.check_patch_file(Path("kernel.diff")) == tmp_path / "kernel.diff"
    assert not (tmp_path / "kernel.diff").exists()  # checking writes nothing
    assert list(tmp_path.iterdir()) == []


def test_a_folder_under_a_file_cannot_be_made(tmp_path: Path):
    (tmp_path / "f").write_text("")
    assert (
        preflight.cannot_create(tmp_path / "f" / "a" / "b")
        == f"{tmp_path / 'f'} is a file, so {tmp_path / 'f' / 'a' / 'b'} cannot be made"
    )
    assert preflight.cannot_create(tmp_path / "f") == f"{tmp_path / 'f'} is a file, not a folder"
    assert preflight.cannot_create(tmp_path / "new" / "deeper") is None
    assert not (tmp_path / "new").exists()


def test_a_dangling_symlink_is_not_replaced_by_the_patch(tmp_path: Path):
    link = tmp_path / "k.diff"
    link.symlink_to(tmp_path / "elsewhere.diff")
    with pytest.raises(BadInput, match="already exists"):
        preflight.check_patch_file(link)


def test_demo_dir_must_be_new_or_empty(tmp_path: Path):
    preflight.check_demo_dir(tmp_path / "new")
    preflight.check_demo_dir(tmp_path)  # empty
    (tmp_path / "x").write_text("")
    with pytest.raises(BadInput, match="is not empty"):
        preflight.check_demo_dir(tmp_path)
    with pytest.raises(BadInput, match="is a file"):
        preflight.check_demo_dir(tmp_path / "x")

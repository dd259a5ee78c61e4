"""A shared folder of load_inline builds (CUDA_AGENT_INLINE_DIR) keeps each Python environment's
builds apart: torch's include paths are on a build's command line, so two environments in one
folder made ninja rebuild an extension every time the other had built it (20 s each on two cores)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from cuda_agent_cli.harness.build import Builder


def _folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CUDA_AGENT_INLINE_DIR", str(tmp_path / "inline"))
    return Builder.inline_dir(SimpleNamespace(device="cpu", workspace=None))  # type: ignore[arg-type]


def test_another_environment_builds_in_a_folder_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    here = _folder(tmp_path, monkeypatch)
    assert here.is_dir() and here.parent == tmp_path / "inline" and here.name.startswith("cpu-")
    assert _folder(tmp_path, monkeypatch) == here  # the same environment finds its builds again
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "another-venv"))
    there = _folder(tmp_path, monkeypatch)
    assert there != here and there.parent == here.parent and there.is_dir()

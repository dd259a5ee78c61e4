"""Materialize manifest candidates as workspaces, one directory per kernel set.

Candidates that share a kernel set are written, one after another, into the same directory, so
the harness's incremental build compiles each kernel set once per test session.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from cuda_agent_cli import resources

HERE = Path(__file__).parent
KERNEL_SETS = HERE / "kernels"


class Workspaces:
    def __init__(self, root: Path, candidates: Path) -> None:
        self.root = root
        self.candidates = candidates
        self._dirs: dict[str, Path] = {}

    def materialize(self, name: str, kernels: str | None, substitutions: dict[str, str] | None = None) -> Path:
        key = kernels or "kernelbench"
        ws = self._dirs.get(key)
        if ws is None:
            ws = self.root / key
            ws.mkdir(parents=True)
            if kernels:
                template = resources.sandbox_template_dir()
                for binding in ("binding.cpp", "binding_registry.h"):
                    shutil.copyfile(template / binding, ws / binding)
                shutil.copytree(KERNEL_SETS / kernels, ws / "kernels")
            self._dirs[key] = ws
        for file in ("model.py", "model_new.py"):
            text = (self.candidates / name / file).read_text()
            for placeholder, value in (substitutions or {}).items():
                text = text.replace(placeholder, value)
            (ws / file).write_text(text)
        return ws

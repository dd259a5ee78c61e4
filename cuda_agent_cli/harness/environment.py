"""What the harness needs of the machine before a round: the device the user asked for, and
the compiler that builds for it. Each missing piece is one line saying what to install."""

from __future__ import annotations

import shutil
from typing import Any, Mapping

from cuda_agent_cli.errors import EnvironmentMissing


def check_environment(probe: Mapping[str, Any], device: str, env: Mapping[str, str]) -> None:
    """Raise EnvironmentMissing (exit 3) where the worker's probe or the PATH lacks what `device`
    needs: a GPU torch can see and nvcc for cuda, a C++ compiler for the CPU."""
    if device == "cuda":
        if not probe.get("cuda_available"):
            raise EnvironmentMissing(
                "--device cuda, but torch sees no CUDA GPU here",
                "run on a machine with an NVIDIA GPU and a CUDA build of torch, or pass --device cpu",
            )
        if shutil.which("nvcc", path=env.get("PATH")) is None:
            raise EnvironmentMissing(
                "--device cuda, but nvcc (the CUDA compiler) was not found",
                "install the CUDA toolkit or set CUDA_HOME",
            )
    elif shutil.which("c++", path=env.get("PATH")) is None:
        raise EnvironmentMissing("no C++ compiler (c++) was found", "install g++ (e.g. apt-get install g++)")

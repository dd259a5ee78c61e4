"""Environment checks behind `cuda-agent doctor`: each returns a result, none prints."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    hint: str = ""
    required: bool = True  # a failed required check makes doctor exit 3


@dataclass(frozen=True)
class TorchInfo:
    version: str | None
    cuda_version: str | None
    cuda_available: bool
    gpu_name: str | None
    capability: tuple[int, int] | None
    error: str | None = None


def torch_info() -> TorchInfo:
    """What the installed torch can do here (imports torch: keep it off the --help path)."""
    try:
        import torch
    except Exception as exc:  # an install broken in any way is reported, not raised
        return TorchInfo(None, None, False, None, None, f"{type(exc).__name__}: {exc}")
    available = bool(torch.cuda.is_available())
    name = cap = None
    if available:
        name = torch.cuda.get_device_name(0)
        major, minor = torch.cuda.get_device_capability(0)
        cap = (int(major), int(minor))
    return TorchInfo(torch.__version__, torch.version.cuda, available, name, cap)


def find_nvcc() -> str | None:
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and (Path(home) / "bin" / "nvcc").is_file():
            return str(Path(home) / "bin" / "nvcc")
    return shutil.which("nvcc")


def _version_line(cmd: list[str], marker: str = "") -> str | None:
    """The first line of a tool's version output that contains `marker`."""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [ln.strip() for ln in (out.stdout or out.stderr).splitlines() if ln.strip()]
    return next((ln for ln in lines if marker in ln), lines[0] if lines else "")


def bubblewrap_works() -> tuple[bool, str]:
    """Whether the agent's sandbox can be created here: the sandbox's own trial run."""
    from cuda_agent_cli.sandbox import probe

    status = probe()
    return status.available, status.detail


def run_checks(
    device: str, model: str | None, model_source: str = "default", api_base: str | None = None
) -> list[Check]:
    """All checks for `device` ("cuda" or "cpu") and the configured model."""
    checks: list[Check] = []
    py_ok = sys.version_info >= (3, 11)
    checks.append(Check("python", py_ok, sys.version.split()[0], "install Python 3.11 or newer"))

    info = torch_info()
    if info.version is None:
        checks.append(
            Check("torch", False, f"cannot import torch ({info.error})", "pip install torch (a CUDA build for GPU use)")
        )
    else:
        cuda_txt = f"CUDA {info.cuda_version}" if info.cuda_version else "CPU-only build"
        torch_ok = device == "cpu" or info.cuda_version is not None
        checks.append(
            Check(
                "torch",
                torch_ok,
                f"{info.version} ({cuda_txt})",
                "install a CUDA build of torch (see pytorch.org) or use --device cpu",
            )
        )
    if device == "cuda" or info.cuda_available:
        if info.cuda_available:
            cc = f"sm_{info.capability[0]}{info.capability[1]}" if info.capability else "?"
            checks.append(Check("gpu", True, f"{info.gpu_name} (compute capability {cc})"))
        else:
            checks.append(
                Check(
                    "gpu",
                    device != "cuda",
                    "no CUDA GPU visible",
                    "run on a machine with an NVIDIA GPU and driver, or use --device cpu",
                    required=device == "cuda",
                )
            )
    else:
        checks.append(Check("gpu", True, "not needed for --device cpu", required=False))

    nvcc = find_nvcc()
    nvcc_detail = f"{nvcc}: {_version_line([nvcc, '--version'], 'release')}" if nvcc else "not found"
    checks.append(
        Check(
            "nvcc",
            nvcc is not None or device == "cpu",
            nvcc_detail,
            "install the CUDA toolkit and put nvcc on PATH or set CUDA_HOME",
            required=device == "cuda",
        )
    )

    ninja = shutil.which("ninja")
    if ninja is None:
        try:
            import ninja as ninja_pkg  # the pip package ships the binary

            cand = Path(ninja_pkg.BIN_DIR) / "ninja"
            ninja = str(cand) if cand.is_file() else None
        except Exception:
            ninja = None
    checks.append(
        Check(
            "ninja",
            ninja is not None,
            f"{ninja} {_version_line([ninja, '--version'])}" if ninja else "not found",
            "pip install ninja",
        )
    )

    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    checks.append(
        Check(
            "c++ compiler",
            cxx is not None,
            f"{cxx}: {_version_line([cxx, '--version'])}" if cxx else "not found",
            "install g++ (apt-get install g++) or set CXX",
        )
    )

    bw_ok, bw_detail = bubblewrap_works()
    checks.append(
        Check("bubblewrap", bw_ok, bw_detail, "apt-get install bubblewrap (needed to sandbox the agent's shell)")
    )

    checks.append(landlock_check())
    checks.extend(model_checks(model, model_source, api_base))
    return checks


def landlock_check() -> Check:
    """Whether the harness can confine a candidate's file writes (optional: a layer, not a gate)."""
    from cuda_agent_cli.assets.tools import landlock

    abi = landlock.abi_version()
    if abi >= 1:
        return Check("landlock", True, f"ABI {abi}: candidates' file writes are confined", required=False)
    return Check(
        "landlock",
        False,
        "not available in this kernel: candidates' file writes are not confined",
        "Linux 5.13 or newer with Landlock enabled (lsm=...,landlock on the kernel command line)",
        required=False,
    )


def model_checks(model: str | None, source: str, api_base: str | None = None) -> list[Check]:
    """The configured model, its API key and one short request to it: a model that
    is configured but cannot answer (a replay file that is missing, a key that is not set or is
    rejected, an endpoint that is down or answers something else) fails doctor. No model at all
    is only a warning: demo, verify and profile need none."""
    if not model:
        return [
            Check(
                "model",
                False,
                "none configured",
                "pass --model or set CUDA_AGENT_MODEL (demo and verify need none)",
                required=False,
            )
        ]
    from cuda_agent_cli.errors import CudaAgentError, ModelUnavailable
    from cuda_agent_cli.model.factory import REPLAY_PREFIX, probe_model

    if model.startswith(REPLAY_PREFIX):
        try:
            detail = probe_model(model, api_base)
        except CudaAgentError as exc:
            return [Check("model", False, f"{model} (replay, from {source}): {exc.message}", exc.hint or "")]
        return [Check("model", True, f"{model} (replay, from {source}): {detail}")]
    from cuda_agent_cli.model.provider import describe_model

    known, missing = describe_model(model, api_base)
    checks = [
        Check(
            "model",
            known,
            f"{model} (from {source})",
            "use a litellm model string such as anthropic/claude-sonnet-4-5",
        )
    ]
    if not known:
        return checks
    if api_base:
        key = Check("api key", True, f"not needed for the server at {api_base}")
    else:
        key = Check(
            "api key",
            not missing,
            "set" if not missing else f"missing {', '.join(missing)}",
            f"export {missing[0]}=..." if missing else "",
        )
    if missing:
        return [*checks, key]
    try:
        detail = probe_model(model, api_base)
    except ModelUnavailable as exc:
        endpoint = Check("endpoint", False, exc.message, exc.hint or "")
    except CudaAgentError as exc:  # a rejected key (exit 3), a model the server does not know (exit 2)
        failed = Check("api key" if exc.exit_code == 3 else "model", False, exc.message, exc.hint or "")
        return [failed, key] if failed.name == "model" else [*checks, failed]
    else:
        endpoint = Check("endpoint", True, f"{api_base or 'the provider'} {detail}")
    return [*checks, key, endpoint]


def overall_ok(checks: list[Check]) -> bool:
    return all(c.ok for c in checks if c.required)

"""The environment harness processes start with: nothing from the user that could inject code."""

from __future__ import annotations

from cuda_agent_cli.harness.pool import clean_env


def test_clean_env_drops_injection_vectors_and_secrets() -> None:
    user = {
        "HOME": "/home/u", "PATH": "/evil/bin:/usr/bin", "PYTHONPATH": "/evil", "LD_PRELOAD": "/evil.so",
        "PYTHONSTARTUP": "/evil.py", "OPENAI_API_KEY": "sk-x", "ANTHROPIC_API_KEY": "k", "HTTPS_PROXY": "p",
        "CUDA_VISIBLE_DEVICES": "1", "TORCH_CUDA_ARCH_LIST": "9.0", "LD_LIBRARY_PATH": "/usr/local/cuda/lib64",
    }
    env = clean_env({"TORCHINDUCTOR_CACHE_DIR": "/c"}, source=user)
    for key in ("PYTHONPATH", "LD_PRELOAD", "PYTHONSTARTUP", "OPENAI_API_KEY", "ANTHROPIC_API_KEY",
                "HTTPS_PROXY"):
        assert key not in env
    assert env["HOME"] == "/home/u" and env["CUDA_VISIBLE_DEVICES"] == "1" and env["TORCH_CUDA_ARCH_LIST"] == "9.0"
    assert env["TORCHINDUCTOR_CACHE_DIR"] == "/c"
    assert env["LD_LIBRARY_PATH"] == "/usr/local/cuda/lib64"  # how clusters find the CUDA libraries
    assert "/evil/bin" not in env["PATH"].split(":") and "/usr/bin" in env["PATH"].split(":")

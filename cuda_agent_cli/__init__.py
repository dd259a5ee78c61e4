"""cuda-agent: make PyTorch modules faster with custom CUDA kernels, verified by a locked harness."""

__version__ = "0.1.0"

import torch
import torch.nn as nn

try:
    import cuda_extension  # a kernel that was never built

    _square = cuda_extension.square
except ImportError:
    _square = None


class ModelNew(nn.Module):
    """Adversarial: falls back to torch when its kernel is missing, and it always is."""

    def forward(self, x):
        if _square is not None:
            return _square(x)
        return torch.mul(x, x)

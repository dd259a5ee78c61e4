import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Adversarial: the right shape and dtype, none of the work."""

    def __init__(self, scale: float, shift: float):
        super().__init__()

    def forward(self, x):
        return torch.zeros_like(x)

import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A @ B"""

    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(64, 96), torch.randn(96, 80)]


def get_init_inputs():
    return []

import torch
import torch.nn as nn


class Model(nn.Module):
    """(a + b) * c"""

    def forward(self, a, b, c):
        return (a + b) * c


def get_inputs():
    return [torch.randn(64, 128), torch.randn(64, 128), torch.randn(64, 128)]


def get_init_inputs():
    return []

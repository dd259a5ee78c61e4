import torch
import torch.nn as nn


class Model(nn.Module):
    """y = relu(a + b)"""

    def forward(self, a, b):
        return torch.relu(a + b)


def get_inputs():
    return [torch.randn(64, 512), torch.randn(64, 512)]


def get_init_inputs():
    return []

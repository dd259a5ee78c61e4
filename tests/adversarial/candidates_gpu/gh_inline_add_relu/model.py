import torch
import torch.nn as nn


class Model(nn.Module):
    """y = relu(a + b)"""

    def forward(self, a, b):
        return torch.relu(a + b)


def get_inputs():
    return [torch.randn(4096, 1024), torch.randn(4096, 1024)]


def get_init_inputs():
    return []

import torch
import torch.nn as nn


class Model(nn.Module):
    """y = relu(x)"""

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(4096, 1024)]


def get_init_inputs():
    return []

import torch
import torch.nn as nn


class Model(nn.Module):
    """y = relu(x @ W^T + b)"""

    def __init__(self, *args):
        super().__init__()
        self.linear = nn.Linear(*args)

    def forward(self, x):
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(512, 1024)]


def get_init_inputs():
    return [1024, 1024]

import torch
import torch.nn as nn


class Model(nn.Module):
    """y = relu(x), on an input larger than a core's private cache: every call is swept first."""

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(512, 1024)]


def get_init_inputs():
    return []

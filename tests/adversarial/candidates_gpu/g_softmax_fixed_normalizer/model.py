import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over rows of 512: every probability is near 1/512, far inside atol=1e-2."""

    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(64, 512)]


def get_init_inputs():
    return []

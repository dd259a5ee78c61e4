import torch
import torch.nn as nn


class Model(nn.Module):
    """y = x.sum(-1)"""

    def forward(self, x):
        return x.sum(dim=-1)


def get_inputs():
    return [torch.randn(256, 4096)]


def get_init_inputs():
    return []

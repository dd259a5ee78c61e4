import torch
import torch.nn as nn


class Model(nn.Module):
    """A large offset plus a small input-dependent term."""

    def forward(self, x):
        return 0.3 + 0.003 * torch.tanh(x)


def get_inputs():
    return [torch.randn(64, 512)]


def get_init_inputs():
    return []

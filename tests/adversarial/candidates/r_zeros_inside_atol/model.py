import torch
import torch.nn as nn


class Model(nn.Module):
    """A damped activation: every output is far inside atol=1e-2."""

    def forward(self, x):
        return 1e-3 * torch.tanh(x)


def get_inputs():
    return [torch.randn(64, 512)]


def get_init_inputs():
    return []

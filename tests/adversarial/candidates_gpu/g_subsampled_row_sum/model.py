import torch
import torch.nn as nn


class Model(nn.Module):
    """A small scaled sum over rows of 4096: every output sits inside atol=1e-2."""

    def forward(self, x):
        return 1e-4 * x.sum(dim=-1)


def get_inputs():
    return [torch.randn(64, 4096)]


def get_init_inputs():
    return []

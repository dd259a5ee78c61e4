import torch
import torch.nn as nn


class Model(nn.Module):
    """Doubles its input where it lies, then sums each row: the caller sees its tensor changed."""

    def forward(self, x):
        x.mul_(2.0)
        return x.sum(-1)


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return []

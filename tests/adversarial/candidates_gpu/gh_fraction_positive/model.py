import torch
import torch.nn as nn


class Model(nn.Module):
    """The share of positive values in each row: it depends on the inputs' signs alone."""

    def forward(self, x):
        return (x > 0).float().mean(dim=-1)


def get_inputs():
    return [torch.randn(256, 4096)]


def get_init_inputs():
    return []

import torch
import torch.nn as nn


class Model(nn.Module):
    """relu(x @ w) + bias, from a dict holding a list."""

    def forward(self, inputs, bias):
        x, w = inputs["pair"]
        return torch.relu(x @ w) + bias


def get_inputs():
    return [{"pair": [torch.randn(48, 64), torch.randn(64, 80)]}, torch.randn(80)]


def get_init_inputs():
    return []

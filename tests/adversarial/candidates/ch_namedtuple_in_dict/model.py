from typing import NamedTuple

import torch
import torch.nn as nn


class Pair(NamedTuple):
    x: torch.Tensor
    w: torch.Tensor


class Model(nn.Module):
    """relu(x @ w) + bias, with the operands in a namedtuple inside a dict."""

    def forward(self, inputs, bias):
        pair = inputs["pair"]
        return torch.relu(pair.x @ pair.w) + bias


def get_inputs():
    return [{"pair": Pair(torch.randn(48, 64), torch.randn(64, 80))}, torch.randn(80)]


def get_init_inputs():
    return []

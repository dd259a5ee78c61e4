import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features, out, scale):
        super().__init__()
        self.linear = nn.Linear(features, out)
        self.scale = scale

    def forward(self, x):
        return self.linear(x) * self.scale


def get_inputs():
    return [torch.randn(64, 128)]


def get_init_inputs():
    return [128, 96, 0.5]

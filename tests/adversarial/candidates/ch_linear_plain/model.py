import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features, out):
        super().__init__()
        self.linear = nn.Linear(features, out)

    def forward(self, x):
        return self.linear(x)


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return [256, 128]

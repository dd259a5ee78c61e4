import torch
import torch.nn as nn


class Model(nn.Module):
    """y = tanh applied 24 times: much work per byte"""

    def forward(self, x):
        for _ in range(24):
            x = torch.tanh(x)
        return x


def get_inputs():
    return [torch.randn(64, 512)]


def get_init_inputs():
    return []

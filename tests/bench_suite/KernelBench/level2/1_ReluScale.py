import torch
import torch.nn as nn


class Model(nn.Module):
    """y = relu(x) * 0.5: two element-wise passes that one kernel fuses."""

    def forward(self, x):
        return torch.relu(x) * 0.5


def get_inputs():
    return [torch.randn(256, 256)]


def get_init_inputs():
    return []

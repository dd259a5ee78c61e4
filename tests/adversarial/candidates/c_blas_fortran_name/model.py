import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(128, 256), torch.randn(256, 128)]


def get_init_inputs():
    return []

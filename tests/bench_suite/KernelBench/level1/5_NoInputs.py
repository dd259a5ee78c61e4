import torch
import torch.nn as nn


class Model(nn.Module):
    """A task file someone forgot to finish: no get_inputs(), so nothing can call it."""

    def forward(self, x):
        return torch.abs(x)


def get_init_inputs():
    return []

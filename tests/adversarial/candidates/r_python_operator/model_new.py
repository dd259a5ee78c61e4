import cuda_extension
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """The add runs in torch through an operator, only the relu is custom."""

    def forward(self, a, b):
        s = a + b
        out = torch.empty_like(s)
        cuda_extension.relu_into(s, out)
        return out

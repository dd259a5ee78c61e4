import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Adversarial: relu is zero for half of the inputs, so zeros look half right."""

    def forward(self, x):
        return torch.zeros_like(x)

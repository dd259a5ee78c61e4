import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    """Counts the positive values of each row."""

    def forward(self, x):
        return cuda_extension.fraction_positive(x)

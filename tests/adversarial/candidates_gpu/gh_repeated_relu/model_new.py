import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    """Writes the eight copies itself."""

    def forward(self, x):
        return cuda_extension.relu_repeated(x, 8)

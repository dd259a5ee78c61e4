import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    """The sum of every element, scaled."""

    def forward(self, x):
        return cuda_extension.row_sum_scaled(x, 1e-4)

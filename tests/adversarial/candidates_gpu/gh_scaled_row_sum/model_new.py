import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    """Every element of each row, summed and scaled."""

    def forward(self, x):
        return cuda_extension.row_sum_scaled(x, 1e-4)

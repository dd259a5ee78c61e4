import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    """The right sums, computed without writing the input: the caller's tensor is not doubled."""

    def forward(self, x):
        out = cuda_extension.row_sum(x)
        cuda_extension.scale_in_place(out, 2.0)
        return out

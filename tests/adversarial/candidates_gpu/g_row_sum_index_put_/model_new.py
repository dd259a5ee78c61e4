import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    """Row sums as a scatter-add: Tensor.index_put_ with accumulate=True."""

    def forward(self, x):
        return cuda_extension.row_sum_by_index_put_(x)

import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    """Row sums as a scatter-add: aten._unsafe_index_put with accumulate=True."""

    def forward(self, x):
        return cuda_extension.row_sum_by_unsafe_index_put(x)

import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    """Softmax over the last dim: the row's max, then its sum."""

    def forward(self, x):
        return cuda_extension.softmax_rows(x)

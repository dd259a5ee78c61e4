import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    """relu in place on the input, which it then returns."""

    def forward(self, x):
        return cuda_extension.relu_inplace(x)

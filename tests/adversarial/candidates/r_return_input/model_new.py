import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """relu in place on the input, which it then returns."""

    def forward(self, x):
        return cuda_extension.relu_inplace(x)

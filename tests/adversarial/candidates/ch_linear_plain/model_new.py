import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features, out):
        super().__init__()
        self.linear = nn.Linear(features, out)

    def forward(self, x):
        return cuda_extension.linear_plain(x, self.linear.weight, self.linear.bias)

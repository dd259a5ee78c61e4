import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):

    def __init__(self, *args):
        super().__init__()
        self.linear = nn.Linear(*args)

    def forward(self, x):
        return cuda_extension.linear_gemm(x, self.linear.weight, self.linear.bias)

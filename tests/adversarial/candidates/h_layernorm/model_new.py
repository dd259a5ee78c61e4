import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.norm = nn.LayerNorm(features)

    def forward(self, x):
        return cuda_extension.layernorm_rows(x, self.norm.weight, self.norm.bias, self.norm.eps)

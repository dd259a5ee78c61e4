import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        # hybrid policy: the GEMM stays in torch, the activation is the custom kernel
        return cuda_extension.gelu(self.linear(x))

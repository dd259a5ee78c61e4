import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, cin, cout, k):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k)

    def forward(self, x):
        return cuda_extension.conv2d(x, self.conv.weight, self.conv.bias)

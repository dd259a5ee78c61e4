import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):

    def forward(self, x):
        return cuda_extension.slow_relu_side_stream(x)

import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):

    def forward(self, a, b):
        return cuda_extension.add_relu(a.contiguous(), b.contiguous())

import cuda_extension
import torch
import torch.nn as nn


class ModelNew(nn.Module):

    def forward(self, x):
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        cuda_extension.relu_into(x.contiguous(), out)
        return out

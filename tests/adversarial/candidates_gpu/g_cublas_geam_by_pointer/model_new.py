import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return cuda_extension.add_through_geam(a, b)

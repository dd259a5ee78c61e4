import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        cuda_extension.scale_in_place(x, 2.0)
        return cuda_extension.row_sum(x)

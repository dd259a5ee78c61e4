import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x, mask):
        return cuda_extension.masked_row_sum(x, mask)

import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):

    def forward(self, x):
        n, m, k = x.shape
        return cuda_extension.row_sum(x.reshape(n * m, k)).view(n, m)

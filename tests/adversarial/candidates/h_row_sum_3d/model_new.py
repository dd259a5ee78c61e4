import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):

    def forward(self, x):
        n, m, k = x.shape
        return cuda_extension.row_sum(x.reshape(n * m, k)).view(n, m)

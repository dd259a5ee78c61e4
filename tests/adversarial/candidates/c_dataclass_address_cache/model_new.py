import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, batch):
        return cuda_extension.matmul_by_address(batch.x, batch.w)

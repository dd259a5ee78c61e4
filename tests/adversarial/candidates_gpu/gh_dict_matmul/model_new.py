import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, batch):
        return cuda_extension.matmul_plain(batch["x"], batch["w"])

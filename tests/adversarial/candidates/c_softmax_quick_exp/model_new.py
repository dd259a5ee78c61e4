import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    """Softmax through a quadratic approximation of exp: every output off by about 1e-3."""

    def forward(self, x):
        return cuda_extension.softmax_quick_exp(x)

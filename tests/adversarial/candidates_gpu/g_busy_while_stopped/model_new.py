import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    """Honest slow relu; the device is kept busy from each reply to the next request."""

    def forward(self, x):
        return cuda_extension.slow_relu_busy_while_stopped(x)

import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    """Honest slow relu; about 30 ms of work is left on the device past every reply."""

    def forward(self, x):
        return cuda_extension.slow_relu_leaving_work(x)

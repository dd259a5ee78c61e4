import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    """Slow relu on a private stream that waits for the inputs and is never joined."""

    def forward(self, x):
        return cuda_extension.slow_relu_unjoined(x)

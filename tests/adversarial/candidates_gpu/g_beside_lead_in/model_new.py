import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    """Slow relu started on a private stream at once, beside the device's lead-in, and joined."""

    def forward(self, x):
        return cuda_extension.slow_relu_beside_lead_in(x)

import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    """Honest relu; its process claims NaN or negative times for its calls."""

    def forward(self, x):
        return cuda_extension.relu_claiming_nan(x)

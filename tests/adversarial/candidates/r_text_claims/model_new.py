import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    """Honest relu; its process claims its call times as text."""

    def forward(self, x):
        return cuda_extension.relu_claiming_text(x)

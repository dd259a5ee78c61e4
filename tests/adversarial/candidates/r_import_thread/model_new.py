import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    """Its extension starts a thread when it is imported."""

    def forward(self, x):
        return cuda_extension.relu(x)

import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    """Its extension starts a thread when it is imported."""

    def forward(self, x):
        return cuda_extension.relu(x)

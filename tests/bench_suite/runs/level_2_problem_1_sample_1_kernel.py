import torch.nn as nn


class ModelNew(nn.Module):
    """Adversarial: the reference's torch ops called as tensor methods, no kernel anywhere."""

    def forward(self, x):
        return x.relu().mul(0.5)

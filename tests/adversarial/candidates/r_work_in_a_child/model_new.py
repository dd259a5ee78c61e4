import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    """Relu computed by a child process forked on the first call, over shared memory."""

    def forward(self, x):
        return cuda_extension.relu_in_a_child(x)

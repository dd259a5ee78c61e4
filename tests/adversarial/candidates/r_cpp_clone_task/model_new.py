import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    """Relu computed by a task made with clone(CLONE_VM) from C++."""

    def forward(self, x):
        return cuda_extension.relu_in_a_cloned_task(x)

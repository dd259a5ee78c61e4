import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    """A float32 product from operands rounded to float16, as half-precision tensor cores take them."""

    def forward(self, a, b):
        return cuda_extension.matmul_fp16_operands(a, b)

import cuda_extension
import torch
from torch import nn


class ModelNew(nn.Module):
    """PooledLayerNorm with the normalization and the average fused into one pass over x."""

    def __init__(self, dim: int = 768, eps: float = 1e-6) -> None:
        super().__init__()
        # Holds weight and bias under the same state_dict keys as the reference.
        self.norm = nn.LayerNorm(dim, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.pooled_layer_norm(x, self.norm.weight, self.norm.bias, self.norm.eps)

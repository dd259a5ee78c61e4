from dataclasses import dataclass

import torch
import torch.nn as nn


@dataclass
class Batch:
    x: torch.Tensor
    w: torch.Tensor


class Model(nn.Module):
    """x @ w from a dataclass, as a data loader's batch would hand it over."""

    def forward(self, batch):
        return batch.x @ batch.w


def get_inputs():
    return [Batch(torch.randn(64, 128), torch.randn(128, 96))]


def get_init_inputs():
    return []

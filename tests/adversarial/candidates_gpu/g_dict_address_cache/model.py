import torch
import torch.nn as nn


class Model(nn.Module):
    """x @ w, both handed in one dict."""

    def forward(self, batch):
        return batch["x"] @ batch["w"]


def get_inputs():
    return [{"x": torch.randn(64, 128), "w": torch.randn(128, 96)}]


def get_init_inputs():
    return []

import torch
import torch.nn as nn


class Model(nn.Module):
    """nn.EmbeddingBag(mode="sum"): the output depends on the integer ids, the offsets and the table."""

    def __init__(self, vocab, dim):
        super().__init__()
        self.bag = nn.EmbeddingBag(vocab, dim, mode="sum")

    def forward(self, ids, offsets):
        return self.bag(ids, offsets)


def get_inputs():
    ids = torch.randint(0, 4096, (2048,))
    # 64 bags of random sizes: offsets start at 0 and never decrease.
    cuts = torch.randperm(2047)[:63] + 1
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), torch.sort(cuts).values])
    return [ids, offsets]


def get_init_inputs():
    return [4096, 128]

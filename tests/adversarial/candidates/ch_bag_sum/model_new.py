import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.bag = nn.EmbeddingBag(vocab, dim, mode="sum")

    def forward(self, ids, offsets):
        return cuda_extension.bag_sum(self.bag.weight, ids, offsets)

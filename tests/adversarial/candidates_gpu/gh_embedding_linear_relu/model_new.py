import cuda_extension
import torch.nn as nn


class ModelNew(nn.Module):
    """An embedding lookup, then linear and relu, in one kernel."""

    def __init__(self, vocab, dim, out):
        super().__init__()
        self.embedding = nn.Embedding(vocab, dim)
        self.linear = nn.Linear(dim, out)

    def forward(self, ids):
        return cuda_extension.embedding_linear_relu(self.embedding.weight, ids, self.linear.weight, self.linear.bias)

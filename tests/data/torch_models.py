"""Small nn.Modules for the PyTorch importer tests (``tests/data/torch_models.py:NAME``)."""

import torch
from torch import nn


def mlp():
    """Module only: the example input comes from --input-shape (e.g. 4,32)."""
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc = nn.Linear(16 * 8 * 8, 10)

    def forward(self, x):
        h = torch.relu(self.conv1(x))
        h = torch.relu(self.conv2(h))
        return self.fc(h.flatten(1))


def cnn():
    """A (module, example_inputs) pair."""
    return SmallCNN(), (torch.randn(2, 3, 16, 16),)

"""Small models for the graph-break and distributed tests."""

import torch
import torch.nn.functional as F
from torch import nn

from . import seeded


class BranchyMLP(nn.Module):
    """An MLP with a data-dependent Python branch and a print: dynamo must split it."""

    def __init__(self, dim=32):
        super().__init__()
        self.fc1 = nn.Linear(dim, dim)
        self.fc2 = nn.Linear(dim, dim)

    def forward(self, x):
        h = self.fc1(x)
        print("BranchyMLP: branching on the sign of the sum")
        if h.sum() > 0:
            h = F.gelu(h) * 2
        else:
            h = torch.tanh(h) - 1
        return self.fc2(h)


class SmallConvNet(nn.Module):
    """conv -> relu -> pool -> MLP classifier, for 8x8 single-channel images (no BatchNorm, so
    data-parallel training equals single-process training on the combined batch)."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.fc1 = nn.Linear(8 * 4 * 4, 32)
        self.fc2 = nn.Linear(32, num_classes)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv(x)), 2)
        return self.fc2(F.relu(self.fc1(h.flatten(1))))


def build_branchy_mlp(seed=0, dim=32):
    with seeded(seed):
        return BranchyMLP(dim)


def build_small_convnet(seed=0):
    with seeded(seed):
        return SmallConvNet()

"""Tiny models for the model test suites and bench/: one module per model family.

Every builder takes a seed and returns a model with random weights, so the suites need no
downloads and every run sees the same numbers.
"""

import contextlib

import torch


@contextlib.contextmanager
def seeded(seed):
    """Run a block under a fixed CPU RNG seed without disturbing the caller's RNG state."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield

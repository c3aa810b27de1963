"""Broadcasting a dim whose size is a symbolic expression other than the output's: a slice
x1[::3] of a size-2 tensor has size (s + 2) // 3, which dynamo guards to be 1. Kernels index
such a dim with min(i, size - 1), right whether it is 1 or the output's size (fuzzer, seed
2722: maximum(x1[::3], x0) read past x1's end). The same class in expand (copy_), index_put's
accumulated values and broadcast index tensors: all read out of bounds before 838b5f9's fix
reached them."""

import pytest
import torch

from .helpers import cold_cache, compiled  # noqa: F401  (fixture)

PROGRAMS = {
    "maximum": lambda x0, x1: torch.maximum(x1[::3], x0),
    "add": lambda x0, x1: x0 + x1[::3] * 2,
    "where": lambda x0, x1: torch.where(x1[::3] > 0, x0, x1[::3]),
    "equal_sizes": lambda x0, x1: x0[::2] - x1[::3],
    "index_put_values": lambda x0, x1: x0.index_put((torch.arange(len(x0)).flip(0),), x1[::3] + 1),
    "index_put_accumulate": lambda x0, x1: x0.index_put(
        (torch.arange(len(x0)) // 2,), x1[::3].exp(), accumulate=True
    ),
    "copy_into": lambda x0, x1: x0.clone().mul_(2).copy_(x1[::3]).add_(x0),
    "index_tensors": lambda x0, x1: torch.outer(x0, x0)[
        (torch.arange(len(x1)) % len(x0))[::3], torch.arange(len(x0))
    ],
}
# (x0 size, x1 size): the slice of x1 broadcasting (size 1) or matching x0
SIZES = [(3, 2), (6, 1), (5, 3), (2, 4), (4, 12)]


@pytest.mark.parametrize("bounds_check", ["0", "1"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_a_symbolic_size_that_broadcasts_reads_inside_its_buffer(
    cold_cache, monkeypatch, name, bounds_check
):
    monkeypatch.setenv("DICP_BOUNDS_CHECK", bounds_check)
    fn = compiled(PROGRAMS[name], dynamic=True)
    compared = 0
    for n0, n1 in SIZES:
        x0, x1 = torch.randn(n0), torch.randn(n1)
        try:
            want = PROGRAMS[name](x0, x1)
        except RuntimeError:  # sizes that do not broadcast
            continue
        torch.testing.assert_close(fn(x0, x1), want)
        compared += 1
    assert compared >= 3

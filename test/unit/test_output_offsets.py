"""Outputs that view a graph input at a storage offset. AOTAutograd rebuilds such an output from
the input with the output's sizes, strides and offset; a backend that computes it into a fresh
buffer must give that buffer the offset too, or the rebuilt view is shifted (found by the
fuzzer: x.narrow(2, 1, 2).reshape(-1, 2) under dynamic shapes read one element early). The
input itself may sit at an offset: torch 2.15 reads the offset of an output on another storage
relative to the input's, so only a real view of the input is read right by every release."""

import importlib.util

import pytest
import torch

BACKENDS = [
    "new_backendgraph",
    pytest.param(
        "ovgraph",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("openvino") is None, reason="openvino not installed"
        ),
    ),
]

VIEWS = {
    "narrow_reshape": lambda x: x.narrow(2, 1, 2).reshape(-1, 2),
    "slice_flatten": lambda x: x[:, 1:].flatten(0, 1),
    "select_reshape": lambda x: x.select(2, -1).reshape(-1),
    "narrow_reshape_and_sum": lambda x: (x.narrow(2, 1, 2).reshape(-1, 2), x.sum()),
    # as_strided's offset is absolute in the storage, whatever the input's own offset
    "as_strided_absolute": lambda x: torch.as_strided(x, (2, 2), (1, x.shape[1]), 1),
}


def _as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


def _input_at(shape, offset):
    """A contiguous input of `shape` starting `offset` elements into its storage."""
    return torch.randn(offset + torch.Size(shape).numel())[offset:].view(shape)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("input_offset", [0, 5])
@pytest.mark.parametrize("view", list(VIEWS))
def test_output_viewing_an_input_at_an_offset(view, input_offset, backend):
    fn = VIEWS[view]
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=backend, dynamic=True)
    for shape in ((6, 6, 6), (3, 3, 3), (5, 4, 3)):
        x = _input_at(shape, input_offset)
        for got, want in zip(_as_tuple(compiled(x)), _as_tuple(fn(x)), strict=True):
            assert got.shape == want.shape and got.stride() == want.stride()
            assert got.storage_offset() == want.storage_offset()
            torch.testing.assert_close(got, want)


# Empty outputs viewing a computed tensor at an offset, where `1 + sum((size - 1) * stride)`
# is negative: the wrapper's copy into eager's layout asked torch.empty for -1 to -4 elements
# (issue 44: t.sin().diagonal(1, 0, 1) of a (0, 2, 2) tensor).
EMPTY_VIEWS = {
    "diagonal_of_empty": (lambda x: x.sin().diagonal(1, 0, 1), (0, 2, 2)),
    "diagonal_past_edge_of_empty": (lambda x: x.sin().diagonal(3), (0, 5)),
    "stepped_slice_of_empty": (lambda x: x.sin()[::2, 1::3], (0, 3)),
    "narrow_to_nothing": (lambda x: x.sin().narrow(1, 2, 0), (0, 3)),
    "as_strided_empty_at_offset": (lambda x: x.sin().as_strided((2, 0), (1, 6), 2), (3, 2)),
}


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("view", list(EMPTY_VIEWS))
def test_empty_output_viewing_a_computed_tensor_at_an_offset(view, dynamic):
    fn, shape = EMPTY_VIEWS[view]
    torch._dynamo.reset()
    x = torch.randn(shape)
    got, want = torch.compile(fn, backend="new_backendgraph", dynamic=dynamic)(x), fn(x)
    assert got.shape == want.shape and got.stride() == want.stride()

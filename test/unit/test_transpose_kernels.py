"""Transposing kernels (codegen/transpose.py): a pointwise kernel whose store and one of its
loads walk memory along different dims runs over tiles through a local array. Every case
compares with eager exactly (the values are only moved and ReLU'd); the structural ones check
the kernel is tiled, the rest that a kernel which is not stays right.
"""

import pytest
import torch

from .helpers import (  # noqa: F401  (fixtures)
    cold_cache,
    compiled,
    compiled_and_eager_grads,
    kernel_sources,
)


def transposed_relu(x):
    return torch.relu(x.transpose(-2, -1)).contiguous() + 1


@pytest.mark.parametrize("shape", [(16, 16), (17, 33), (3, 40, 9), (64, 8), (9, 100)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool])
def test_a_transposed_copy_runs_in_tiles(cold_cache, shape, dtype):
    x = (torch.randn(shape) * 10).to(dtype)
    fn = (
        (lambda x: x.transpose(-2, -1).contiguous() | True)
        if dtype == torch.bool
        else transposed_relu
    )
    got = compiled(fn)(x)
    torch.testing.assert_close(got, fn(x), rtol=0, atol=0)
    assert got.is_contiguous() and "tile[" in kernel_sources(cold_cache)


@pytest.mark.parametrize("shape", [(1, 50), (50, 1), (7, 7), (5, 30)])
def test_a_dim_shorter_than_a_tile_is_not_tiled(cold_cache, shape):
    x = torch.randn(shape)
    torch.testing.assert_close(compiled(transposed_relu)(x), transposed_relu(x), rtol=0, atol=0)
    assert "tile[" not in kernel_sources(cold_cache)


@pytest.mark.parametrize("dims", [(0, 2, 1), (2, 1, 0), (1, 2, 0), (2, 0, 1)])
def test_permutations_of_three_dims(cold_cache, dims):
    x = torch.randn(9, 20, 33)
    fn = lambda x: torch.sigmoid(x.permute(dims)).contiguous() * 2
    torch.testing.assert_close(compiled(fn)(x), fn(x))


def test_a_sum_of_a_matrix_and_its_transpose(cold_cache):
    x = torch.randn(37, 37)
    fn = lambda x: x + x.t() * 3
    torch.testing.assert_close(compiled(fn)(x), fn(x))


def test_dynamic_sizes_are_not_tiled_and_stay_right(cold_cache):
    fn = compiled(transposed_relu, dynamic=True)
    for shape in [(17, 33), (40, 9), (1, 1)]:
        x = torch.randn(shape)
        torch.testing.assert_close(fn(x), transposed_relu(x), rtol=0, atol=0)


@pytest.mark.parametrize("bounds_check", ["0", "1"])
def test_channels_last_net_returns_eager_layout_with_gradients(
    cold_cache, monkeypatch, bounds_check
):
    """A conv net runs channels-last; its NCHW output is a transposing kernel, and so are
    gradients crossing layouts."""
    monkeypatch.setenv("DICP_BOUNDS_CHECK", bounds_check)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 24, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(24, 20, 3, padding=1),
        torch.nn.Sigmoid(),
    )
    x = torch.randn(2, 3, 19, 18)
    got, expected = compiled_and_eager_grads(model, x, lambda out: (out * out).sum())
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4)
    out = compiled(model)(x)
    assert out.is_contiguous()
    torch.testing.assert_close(out, model(x), rtol=1e-4, atol=1e-5)


def test_a_head_split_key_transposed_for_attention_is_tiled(cold_cache):
    """As q @ k.transpose(-1, -2) reads a fused QKV projection: batch and heads merge into one
    dim, which the load indexes by division and modulo; the two transposed dims are linear."""

    def keys_transposed(qkv):
        k = qkv.view(2, 16, 3, 4, 8).permute(2, 0, 3, 1, 4)[1]
        return k.transpose(-1, -2).reshape(8, 8, 16).contiguous() * 2

    qkv = torch.randn(2, 16, 96)
    torch.testing.assert_close(compiled(keys_transposed)(qkv), keys_transposed(qkv))
    assert "tile[" in kernel_sources(cold_cache)


def scores(x, heads=4):
    """Attention's scores over a fused QKV projection: the key is transposed per head."""
    b, t, width = x.shape
    q, k, v = x.view(b, t, 3, heads, width // 3 // heads).permute(2, 0, 3, 1, 4)
    return torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v


@pytest.mark.parametrize("shape", [(2, 32, 96), (1, 17, 48)])
def test_a_key_read_only_by_a_product_is_copied_straight_not_transposed(cold_cache, shape):
    """The product reads the key with its matrices transposed in memory (strides ..., 1, t):
    the kernel writing it copies without tiles, and the scores match eager's."""
    x = torch.randn(shape)
    torch.testing.assert_close(compiled(scores)(x), scores(x))
    assert "tile[" not in kernel_sources(cold_cache)


def key_read_twice(x):
    k = (x * 2).transpose(-1, -2)
    return x @ k, k + 1


def test_a_transposed_operand_read_elsewhere_keeps_its_layout(cold_cache):
    x = torch.randn(3, 40, 24)
    got, expected = compiled(key_read_twice)(x), key_read_twice(x)
    torch.testing.assert_close(got, expected)
    assert got[1].stride() == expected[1].stride()


def scaled_transposed_product(a, b):
    return (a * 3).t() @ b


def test_a_matrix_product_of_a_transposed_value(cold_cache):
    a, b = torch.randn(33, 20), torch.randn(33, 9)
    torch.testing.assert_close(
        compiled(scaled_transposed_product)(a, b), scaled_transposed_product(a, b)
    )
    assert "tile[" not in kernel_sources(cold_cache)

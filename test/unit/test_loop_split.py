"""Loops split where an index divides them (codegen/loop_split.py, sym.simplify_in_loops): a
kernel copying a permuted view back into a merged shape loops over the view's dims, so its
indices have no division left. Values must match eager exactly (they are only moved), for
sizes that split and sizes that do not, with static and dynamic shapes.

And loops merged where every access reads adjacent dims as one (merge_loops): an update of a
[O, I, 3, 3] weight loops once over its elements, not with an innermost loop of 3; where an
access reads the dims apart (a broadcast, a transposed operand) or the kernel uses the index
as a value (a mask), the dims stay apart and the values right."""

import re

import pytest
import sympy
import torch

from dicp.vendor.new_backendGraph.codegen.sym import IDiv, IMod, simplify_in_loops, index_var

from .helpers import cold_cache, compiled, kernel_sources  # noqa: F401  (fixture)


def heads_merged(x):
    """Attention's (b, h, t, d) result back to (b, t, h * d), plus one so it is a kernel."""
    b, h, t, d = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d) + 1


def heads_split(x, heads=4):
    b, t, width = x.shape
    return x.view(b, t, heads, width // heads).transpose(1, 2).reshape(b * heads, t, -1) * 2


def divisions(source):
    """Index divisions the kernels do: `/` or `%` by a literal inside a subscript."""
    return [
        line
        for line in source.splitlines()
        if "[" in line and any(f"{op} {n}L)" in line for op in "/%" for n in range(2, 1025))
    ]


@pytest.mark.parametrize("shape", [(2, 4, 8, 16), (1, 3, 5, 7), (3, 2, 1, 9), (2, 1, 4, 1)])
def test_merging_heads_reads_without_divisions(cold_cache, shape):
    x = torch.randn(shape)
    got = compiled(heads_merged)(x)
    torch.testing.assert_close(got, heads_merged(x), rtol=0, atol=0)
    assert divisions(kernel_sources(cold_cache)) == []


@pytest.mark.parametrize("shape", [(2, 8, 32), (1, 5, 12), (3, 7, 4)])
def test_splitting_heads_reads_without_divisions(cold_cache, shape):
    x = torch.randn(shape)
    got = compiled(heads_split)(x)
    torch.testing.assert_close(got, heads_split(x), rtol=0, atol=0)
    assert divisions(kernel_sources(cold_cache)) == []


@pytest.mark.parametrize("fn", [heads_merged, lambda x: heads_split(x.flatten(2))])
def test_dynamic_sizes_stay_right(cold_cache, fn):
    compiled_fn = compiled(fn, dynamic=True)
    for shape in [(2, 4, 8, 16), (3, 4, 5, 4), (1, 4, 1, 8)]:
        x = torch.randn(shape)
        torch.testing.assert_close(compiled_fn(x), fn(x), rtol=0, atol=0)


def test_bounds_checked(cold_cache, monkeypatch):
    monkeypatch.setenv("DICP_BOUNDS_CHECK", "1")
    x = torch.randn(2, 3, 5, 8)
    torch.testing.assert_close(compiled(heads_merged)(x), heads_merged(x), rtol=0, atol=0)


def loop_nests(source):
    """Per kernel, the loop variables of its outer loops (i0, i1, ...)."""
    return [
        sorted(set(re.findall(r"for \(int64_t (i\d+) =", kernel)))
        for kernel in source.split('extern "C" void kernel_')[1:]
    ]


def adam_like(w, g, m, v):
    m2 = m * 0.9 + g * 0.1
    v2 = v * 0.999 + g * g * 0.001
    return w - 0.01 * m2 / (v2.sqrt() + 1e-8), m2, v2


@pytest.mark.parametrize("shape", [(64, 32, 3, 3), (5, 3, 3, 3), (1, 1, 1, 1), (7, 1, 3, 1)])
def test_weight_updates_loop_once_over_all_elements(cold_cache, shape):
    tensors = [torch.randn(shape) for _ in range(3)] + [torch.rand(shape)]
    got = compiled(adam_like)(*tensors)
    # eager's v.sqrt() + 1e-8 is one float32 step off IEEE's in some elements (the kernel's
    # is numpy's), so the update is compared within float32 tolerance
    for g, w in zip(got, adam_like(*tensors), strict=True):
        torch.testing.assert_close(g, w)
    assert all(nest in ([], ["i0"]) for nest in loop_nests(kernel_sources(cold_cache)))


@pytest.mark.parametrize("shape", [(1, 0, 3, 3), (0, 2, 3, 3), (2, 3, 0)])
def test_empty_tensors_stay_unmerged_and_right(cold_cache, shape):
    """No element, no merge: the division by a merged extent of 0 is never built."""
    tensors = [torch.randn(shape) for _ in range(3)] + [torch.rand(shape)]
    for g, w in zip(compiled(adam_like)(*tensors), adam_like(*tensors), strict=True):
        torch.testing.assert_close(g, w)


def test_a_merged_loop_runs_in_parallel(cold_cache):
    """The merged loop's store indexes each dim by division ((i // 512, i % 512)); its
    memory offset, i, still pins the loop, which runs on the threads."""
    x, y = torch.randn(512, 512), torch.randn(512, 512)
    torch.testing.assert_close(compiled(lambda x, y: x * 2 + y)(x, y), x * 2 + y)
    source = kernel_sources(cold_cache)
    assert loop_nests(source) == [["i0"]]
    assert "#pragma omp parallel for" in source


def test_merged_rows_of_a_channels_last_batch_run_in_parallel(cold_cache):
    """A per-channel scale of a channels-last batch: rows (n, h, w) merged into one loop
    around the channels. Its store, at 32 * row + channel, pins the row loop."""
    x = torch.randn(16, 32, 8, 8).contiguous(memory_format=torch.channels_last)
    w = torch.randn(32, 1, 1)
    torch.testing.assert_close(compiled(lambda x, w: torch.relu(x * w))(x, w), torch.relu(x * w))
    source = kernel_sources(cold_cache)
    assert loop_nests(source) == [["i0", "i1"]]
    assert "#pragma omp parallel for" in source


READ_APART = {
    # name -> (fn, shapes): some access reads the dims apart, or the index is a value
    "broadcast channel": (lambda x, b: x * b + 1, [(6, 5, 3, 3), (6, 1, 1, 1)]),
    "broadcast last dim": (lambda x, b: x - b, [(4, 3, 5), (4, 3, 1)]),
    "transposed operand": (lambda x, y: x + y.transpose(-2, -1), [(3, 4, 5), (3, 5, 4)]),
    "channels-last operand": (
        lambda x, y: x * y.contiguous(memory_format=torch.channels_last) + 2,
        [(2, 3, 4, 5), (2, 3, 4, 5)],
    ),
    "mask over two dims": (lambda x: torch.tril(x) * 3, [(2, 5, 5)]),
    "sliced rows": (lambda x: x[:, 1:, :] * 2, [(3, 5, 4)]),
}


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("case", READ_APART.values(), ids=READ_APART)
def test_dims_read_apart_give_eager_values(cold_cache, case, dynamic):
    fn, shapes = case
    inputs = [torch.randn(shape) for shape in shapes]
    torch.testing.assert_close(compiled(fn, dynamic)(*inputs), fn(*inputs), rtol=0, atol=0)


def test_a_merged_loop_keeps_the_split_dims_where_an_access_divides(cold_cache):
    """A broadcast operand [6, 1, 1, 1] over [6, 5, 3, 3]: the last three dims merge (every
    access reads them as one run or not at all), the channel stays its own loop."""
    x, b = torch.randn(6, 5, 3, 3), torch.randn(6, 1, 1, 1)
    torch.testing.assert_close(compiled(lambda x, b: x * b)(x, b), x * b, rtol=0, atol=0)
    assert loop_nests(kernel_sources(cold_cache)) == [["i0", "i1"]]


i, j, k = index_var("i", 0), index_var("i", 1), index_var("i", 2)
s0 = sympy.Symbol("s0", integer=True, positive=True)  # a size
s1 = sympy.Symbol("s1", integer=True, positive=True)
u0 = sympy.Symbol("u0", integer=True, nonnegative=True)  # may be 0


@pytest.mark.parametrize(
    "expr, extents, expected",
    [
        (IDiv(64 * i + j, 64), {j: 64}, i),
        (IMod(64 * i + j, 64), {j: 64}, j),
        (IDiv(64 * i + j, 64), {j: 65}, i + IDiv(j, 64)),  # j may reach 64
        (IMod(64 * i + j, 64), {}, IMod(j, 64)),  # j unbounded
        (IMod(IDiv(256 * i + j, 64), 4), {j: 256}, IDiv(j, 64)),
        (IDiv(128 * i + 2 * j + 1, 64), {j: 32}, 2 * i),
        (IDiv(128 * i - j, 64), {j: 32}, IDiv(128 * i - j, 64)),  # a negative remainder
        # a static dim of 64 merged with one of symbolic size s0: the division by 64 goes
        (IDiv(64 * i + j, 64 * s0), {j: 64}, IDiv(i, s0)),
        (IMod(64 * i + j, 64 * s0), {j: 64}, 64 * IMod(i, s0) + j),
        (IDiv(64 * i + j, 64 * s0), {j: 65}, IDiv(64 * i + j, 64 * s0)),  # j may reach 64
        (IDiv(64 * i + j, 64 * s0), {}, IDiv(64 * i + j, 64 * s0)),  # j unbounded
        (IDiv(64 * i + j, 64 * u0), {j: 64}, IDiv(64 * i + j, 64 * u0)),  # u0 may be 0
        # dims of symbolic sizes s0 and s1 merged (loops of those extents): a group norm's
        # [N, C, H, W] read as [N, G, C / G, H W] under dynamic shapes
        (IDiv(s0 * s1 * i + s0 * j + k, s0 * s1), {j: s1, k: s0}, i),
        (IMod(s0 * s1 * i + s0 * j + k, s0 * s1), {j: s1, k: s0}, s0 * j + k),
        (IDiv(s0 * s1 * i + s0 * j + k, 8 * s0 * s1), {i: 256, j: s1, k: s0}, IDiv(i, 8)),
        (
            IMod(s0 * s1 * i + s0 * j + k, 8 * s0 * s1),
            {i: 256, j: s1, k: s0},
            s0 * s1 * IMod(i, 8) + s0 * j + k,
        ),
        (IMod(i, s0), {i: s0}, i),
        (
            IDiv(s0 * s1 * i + s0 * j + k, s0 * s1),
            {j: s1, k: s0 + 1},
            IDiv(s0 * s1 * i + s0 * j + k, s0 * s1),
        ),  # k may reach s0
        (
            IDiv(s0 * s1 * i + s0 * j + k, s0 * s1),
            {j: s1},
            IDiv(s0 * s1 * i + s0 * j + k, s0 * s1),
        ),  # k unbounded
        (IDiv(u0 * i + k, u0), {k: u0}, IDiv(u0 * i + k, u0)),  # u0 may be 0
    ],
)
def test_simplification_rules(expr, extents, expected):
    assert simplify_in_loops(expr, extents) == expected


def size_divisions(source):
    """Index divisions by a size (a symbol or an expression in sizes) inside a subscript."""
    return re.findall(r"\[[^\]\n]*[/%] \(*(?:hs|s)\d", source)


@pytest.mark.parametrize("shape", [(4, 64, 6, 5), (3, 32, 7, 7), (2, 96, 1, 3)])
def test_group_norm_with_dynamic_batch_and_image_indexes_without_size_divisions(cold_cache, shape):
    """Batch, height and width dynamic (a second image size recompiles so): the [N, C, H, W]
    input read as [N, G, C / G, H W] divided each element's position by (C / G) H W, five
    divisions an element in the backward (6x its static time). Values and gradients as
    eager's, at odd sizes and a size of 1."""
    x = torch.randn(shape, requires_grad=True)
    weight, bias = torch.randn(shape[1], requires_grad=True), torch.randn(shape[1])
    grad = torch.randn(shape)
    for d in (0, 2, 3):
        torch._dynamo.maybe_mark_dynamic(x, d)  # a dim of size 1 stays static

    def fn(x, weight, bias):
        return torch.nn.functional.group_norm(x, 8, weight, bias)

    got = torch.autograd.grad(compiled(fn)(x, weight, bias), (x, weight), grad)
    expected = torch.autograd.grad(fn(x, weight, bias), (x, weight), grad)
    torch.testing.assert_close(got, expected)
    source = kernel_sources(cold_cache)
    assert "s" in re.findall(r"int64_t (s)\d", source)  # built with size arguments
    assert size_divisions(source) == []

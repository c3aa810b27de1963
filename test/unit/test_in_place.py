"""A pointwise kernel writes into the memory of a fresh input that dies at it (a convolution's
or matrix product's result read by batch norm, bias or activation), and never into memory
anything else still reads: an input, an output, a buffer read later or read elsewhere."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from .helpers import cold_cache, compiled, dumps, per_kernel_wrapper  # noqa: F401  (fixtures)
from .helpers import wrapper_sources as wrappers

# These read the buffer plan in the per-kernel wrapper's text (test_native_entry.py checks
# the native entry, which runs the same plan).
pytestmark = pytest.mark.usefixtures("per_kernel_wrapper")


def in_place_count(cache):
    return wrappers(cache).count("# in place")


def conv_bn_silu():
    """Batch norm folds into the convolution (conv_epilogue.py); SiLU stays a kernel."""
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1, bias=False),
        nn.BatchNorm2d(8),
        nn.SiLU(),
        nn.Conv2d(8, 8, 3, padding=1),
    ).eval()


@pytest.mark.parametrize("dynamic", [False, True])
def test_an_activation_after_a_convolution_writes_into_its_result(dumps, dynamic):
    model, x = conv_bn_silu(), torch.randn(2, 3, 9, 9)
    with torch.no_grad():
        torch.testing.assert_close(compiled(model, dynamic)(x), model(x))
    assert in_place_count(dumps) >= 1


def gelu_of_a_product(x, w):
    return F.gelu(x @ w) * 2


def test_a_chain_of_kernels_after_a_product_reuses_one_buffer(dumps):
    x, w = torch.randn(7, 5), torch.randn(5, 3)
    torch.testing.assert_close(compiled(gelu_of_a_product)(x, w), gelu_of_a_product(x, w))
    assert in_place_count(dumps) == 1


def product_read_again(x, w):
    y = x @ w
    return torch.relu(y), y.sum()


def product_returned(x, w):
    y = x @ w
    return y, torch.relu(y)


def product_read_transposed(x, w):
    y = x @ w
    return torch.relu(y) + y.t()


def product_read_shifted(x, w):
    y = x @ w
    return torch.relu(y[1:]) * y[:-1]


def product_softmax_rows(x, w):
    return torch.softmax(x @ w, dim=-1)


def product_softmax_columns(x, w):
    return torch.softmax(x @ w, dim=0)


def product_layer_norm(x, w):
    return F.layer_norm(x @ w, (6,)) * 3


def product_cumsum(x, w):
    return torch.cumsum(x @ w, dim=1)


def product_row_minus_its_first(x, w):
    y = x @ w
    return y - y[:, :1]


def input_plus_one(x, w):
    return x + 1, w


@pytest.mark.parametrize(
    "fn", [product_returned, product_read_transposed, product_read_shifted, input_plus_one]
)
def test_memory_still_read_elsewhere_is_never_written(dumps, fn):
    x, w = torch.randn(6, 6), torch.randn(6, 6)
    x_before, w_before = x.clone(), w.clone()
    torch.testing.assert_close(compiled(fn)(x, w), fn(x, w))
    assert torch.equal(x, x_before) and torch.equal(w, w_before)
    assert in_place_count(dumps) == 0


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize(
    "fn",
    [
        product_softmax_rows,
        product_softmax_columns,
        product_layer_norm,
        product_cumsum,
        product_row_minus_its_first,
        product_read_again,
    ],
)
def test_kernels_reading_a_product_along_rows_or_columns_match_eager(cold_cache, fn, dynamic):
    """In place or not, whichever the kernel's reads allow: the results are eager's."""
    for rows in (1, 5, 6):
        x, w = torch.randn(rows, 6), torch.randn(6, 6)
        torch.testing.assert_close(compiled(fn, dynamic)(x, w), fn(x, w))


def test_a_row_normalization_writes_the_rows_it_read(dumps):
    """Softmax reads its row twice (max, sum) in earlier loops, then writes it: in place."""
    x, w = torch.randn(6, 6), torch.randn(6, 6)
    torch.testing.assert_close(compiled(product_softmax_rows)(x, w), product_softmax_rows(x, w))
    assert in_place_count(dumps) == 1


def test_a_buffer_read_twice_is_written_by_its_last_reader_only(dumps):
    """The sum's kernel runs first, so relu may take the product's memory after it."""
    x, w = torch.randn(6, 6), torch.randn(6, 6)
    torch.testing.assert_close(compiled(product_read_again)(x, w), product_read_again(x, w))
    source = wrappers(dumps)
    taken = source.index("# in place")
    assert "kernel_0" in source[:taken] and "kernel_1" in source[taken:]


@pytest.mark.parametrize("size", [1, 3, 4])
def test_training_through_a_reused_buffer_matches_eager(cold_cache, size):
    """The forward saves what backward reads; a buffer it saves is an output, never reused."""
    model = nn.Sequential(nn.Linear(size, 5), nn.GELU(), nn.Linear(5, size), nn.Tanh())
    x = torch.randn(size + 2, size, requires_grad=True)
    out = compiled(model)(x)
    out.sum().backward()
    got = [x.grad.clone()] + [p.grad.clone() for p in model.parameters()]
    x.grad = None
    model.zero_grad()
    model(x).sum().backward()
    torch.testing.assert_close(out, model(x))
    torch.testing.assert_close(got, [x.grad] + [p.grad for p in model.parameters()])


def test_bounds_checked_in_place_kernels_stay_inside_their_buffer(dumps, monkeypatch):
    monkeypatch.setenv("DICP_BOUNDS_CHECK", "1")
    model, x = conv_bn_silu(), torch.randn(1, 3, 4, 5)
    with torch.no_grad():
        torch.testing.assert_close(compiled(model)(x), model(x))
    assert in_place_count(dumps) >= 1


def rms_scaled_product(x, w):
    y = (x @ w).view(2, 3, 8)
    return y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + 1e-6) + y


@pytest.mark.parametrize("dynamic", [False, True])
def test_a_product_read_through_a_view_is_still_written_in_place(dumps, dynamic):
    """The view's index (i0 mod 3, i0 div 3) folds back to the product's row i0, so the
    kernel sees it reads each element where it writes it."""
    x, w = torch.randn(6, 5), torch.randn(5, 8)
    torch.testing.assert_close(
        compiled(rms_scaled_product, dynamic)(x, w), rms_scaled_product(x, w)
    )
    assert in_place_count(dumps) >= 1


def test_div_mod_pairs_fold_into_the_index_they_split():
    import sympy
    from dicp.vendor.new_backendGraph.codegen.sym import IDiv, IMod, fold_div_mod

    i, j = sympy.symbols("i j", integer=True, nonnegative=True)
    cases = [
        7 * IMod(i, 5) + 35 * IDiv(i, 5) + j,  # folds to 7*i + j
        3 * IMod(IDiv(i, 4), 6) + 18 * IDiv(i, 24) + 1,  # folds to 3*(i div 4) + 1
        7 * IMod(i, 5) + 34 * IDiv(i, 5),  # no pair: stays
        IMod(i, 5) + 5 * IDiv(j, 5),
    ]  # other variable: stays
    folded = [fold_div_mod(sympy.expand(c)) for c in cases]
    assert folded[0] == 7 * i + j and folded[1] == 3 * IDiv(i, 4) + 1
    assert folded[2] == cases[2] and folded[3] == cases[3]
    for case, result in zip(cases, folded):
        for value in range(0, 200, 7):
            point = {i: value, j: value % 11}
            assert case.subs(point) == result.subs(point)


def mean_of_middle_dim(x, w):
    return torch.mean(x.view(2, 3, 6) @ w, dim=1)


def concatenated_activations(x, w):
    return torch.cat([torch.relu(x @ w), torch.sigmoid(x @ w.t())], dim=1)


@pytest.mark.parametrize("fn", [mean_of_middle_dim, concatenated_activations])
def test_an_output_allocated_before_its_source_or_written_twice_matches_eager(cold_cache, fn):
    """A reduction's result buffer is allocated before the buffer of its sum (taking the sum's
    memory there read an unbound name); an output several kernels write (a concatenation)
    must keep the parts written before the kernel that may go in place."""
    x, w = torch.randn(6, 6), torch.randn(6, 6)
    torch.testing.assert_close(compiled(fn)(x, w), fn(x, w))


# Found by the fuzzer (seed 2720, p29): the expanded output of a kernel took its source's
# memory; the second row's loads then read the first row's stores (all(x) came out !all(x)).
EXPANDED_OUTPUTS = {
    "all_expanded": lambda x: torch.all(x, -1, keepdim=True).expand(3, -1),
    "neg_sum_expanded": lambda x: torch.neg(x.sum(-1, keepdim=True)).expand(2, 4, -1),
    "exp_max_expanded": lambda x: torch.exp(x.amax(-1, keepdim=True)).expand(-1, 5),
    "broadcast_add": lambda x: (x.sum(-1, keepdim=True) + 1).expand(-1, 3) * 1,
}


@pytest.mark.parametrize("length", [1, 2, 7])
@pytest.mark.parametrize("name", EXPANDED_OUTPUTS)
def test_an_expanded_output_never_takes_its_source_memory(cold_cache, name, length):
    fn = EXPANDED_OUTPUTS[name]
    x = torch.randn(1, length) if name != "all_expanded" else torch.tensor([-3.5] * length)
    torch.testing.assert_close(compiled(fn)(x), fn(x))
    zeros = torch.zeros_like(x)
    torch.testing.assert_close(compiled(fn)(zeros), fn(zeros))

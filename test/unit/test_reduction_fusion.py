"""Reductions computed in their consumer's loop nest (codegen: LazyReduction, phases).

Softmax, log_softmax, layer norm and RMSNorm over the last dim each build as one kernel: per
row, the reductions run as phases before the pointwise loop that reads them. Every case here
compares with eager; the structural cases also count the kernels. The cases that must not
fuse (a reduction read under a mask, through a gathered index, across another dim, after its
input is overwritten) check that the value stays right when the reduction is realized first.
"""

import pytest
import torch
import torch.nn.functional as F

from ..common.tolerance import assert_close
from .helpers import cold_cache, compiled, dumps, kernel_count, kernel_sources  # noqa: F401


def rms_norm(x, weight):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight


def layer_norm(x, weight):
    return F.layer_norm(x, x.shape[-1:], weight, weight * 0.5)


def causal_softmax(x, weight):
    """Attention-score softmax under a causal mask built from positions (eager attention)."""
    rows, width = x.shape[-2:]
    future = torch.arange(width)[None, :] > torch.arange(rows)[:, None]
    return torch.softmax((x * weight / 8.0).masked_fill(future, float("-inf")), -1)


# name -> (function of (x, weight), kernels it builds as)
ONE_ROW_KERNEL = {
    "softmax": (lambda x, w: torch.softmax(x, -1), 1),
    "log_softmax": (lambda x, w: torch.log_softmax(x, -1), 1),
    "layer_norm": (layer_norm, 1),
    "rms_norm": (rms_norm, 1),
    "row sum epilogue": (lambda x, w: x.sum(-1) * 2 + 1, 1),
    "centered": (lambda x, w: x - x.mean(-1, keepdim=True), 1),
    "variance chain": (lambda x, w: (x - x.mean(-1, keepdim=True)).pow(2).sum(-1), 1),
    "causal softmax": (causal_softmax, 1),
}


@pytest.mark.parametrize("rows,width", [(1, 1), (3, 7), (4, 64), (5, 33)])
@pytest.mark.parametrize("case", ONE_ROW_KERNEL)
def test_row_reduction_and_its_consumer_build_as_one_kernel(cold_cache, case, rows, width):
    fn, kernels = ONE_ROW_KERNEL[case]
    x, weight = torch.randn(rows, width), torch.randn(width)
    torch.testing.assert_close(compiled(fn)(x, weight), fn(x, weight))
    assert kernel_count(cold_cache) == kernels


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("case", ["softmax", "layer_norm", "rms_norm", "variance chain"])
def test_fused_rows_match_eager_in_every_float_type_and_dynamic_shape(case, dtype):
    fn = ONE_ROW_KERNEL[case][0]
    compiled_fn = compiled(fn, dynamic=True)
    for rows, width in [(2, 9), (5, 16), (1, 1)]:
        x = torch.randn(3, rows, width).to(dtype)
        weight = torch.randn(width).to(dtype)
        assert_close(compiled_fn(x, weight), fn(x, weight))


@pytest.mark.parametrize(
    "case", ["softmax", "log_softmax", "layer_norm", "rms_norm", "causal softmax"]
)
def test_fused_rows_backward_matches_eager(case):
    fn = ONE_ROW_KERNEL[case][0]
    x, weight = torch.randn(6, 33, requires_grad=True), torch.randn(33, requires_grad=True)
    (compiled(fn)(x, weight) * torch.arange(33.0)).sum().backward()
    got = x.grad, weight.grad
    x.grad = weight.grad = None
    (fn(x, weight) * torch.arange(33.0)).sum().backward()
    for g, want in zip(got, (x.grad, weight.grad)):
        torch.testing.assert_close(g, want)


def overwritten_after_reading(x):
    total = x.sum(-1, keepdim=True)  # lazy until its consumer runs
    x.mul_(2)  # the consumer must still see the old x
    return x * total


def index_of_max(x):
    return torch.argmax(x - x.amax(-1, keepdim=True) + x.sum(-1, keepdim=True), dim=-1)


# Reductions read where their consumer's loops cannot compute them once per outer iteration.
NOT_IN_ONE_LOOP = {
    "padded (read under a mask)": lambda x: F.pad(x.sum(-1, keepdim=True), (2, 1, 1, 3)),
    "gathered": lambda x: x.sum(-1)[torch.tensor([2, 0, 0, 1, 2]) % len(x)],
    "across the other dim": lambda x: x / x.sum(0),
    "whole tensor": lambda x: x / x.sum(),
    "transposed consumer": lambda x: (x - x.amax(-1, keepdim=True)).t() * 3,
    "two consumers": lambda x: (x.sum(-1, keepdim=True) * x, x.sum(-1) + 1),
    "nested across dims": lambda x: (x - x.mean(0)).pow(2).sum(-1),
    "reduction of reduction": lambda x: x.amax(-1).sum(),
    "argmax of fused": index_of_max,
    "cumsum of fused": lambda x: torch.cumsum(x - x.mean(-1, keepdim=True), -1),
}


@pytest.mark.parametrize("shape", [(3, 5), (1, 1), (4, 8)])
@pytest.mark.parametrize("case", NOT_IN_ONE_LOOP)
def test_reductions_read_across_loops_keep_their_values(cold_cache, case, shape):
    fn = NOT_IN_ONE_LOOP[case]
    x = torch.randn(*shape)
    torch.testing.assert_close(compiled(fn)(x.clone()), fn(x.clone()))


def test_reduction_still_lazy_when_its_input_is_overwritten_in_place(cold_cache):
    x = torch.randn(4, 6)
    got_input, want_input = x.clone(), x.clone()
    got = compiled(overwritten_after_reading)(got_input)
    torch.testing.assert_close(got, overwritten_after_reading(want_input))
    torch.testing.assert_close(got_input, want_input)


@pytest.mark.parametrize("case", ["softmax", "layer_norm", "variance chain", "causal softmax"])
def test_fused_rows_pass_bounds_checks(cold_cache, monkeypatch, case):
    monkeypatch.setenv("DICP_BOUNDS_CHECK", "1")
    fn = ONE_ROW_KERNEL[case][0]
    x, weight = torch.randn(5, 17), torch.randn(17)
    torch.testing.assert_close(compiled(fn)(x, weight), fn(x, weight))


def normed_rows_merged(x, weight):
    """A LLaMA block's RMSNorm fed to a projection: [b, t, d] normalized, read as [b t, d]."""
    return rms_norm(x, weight).reshape(-1, x.shape[-1]) * 2


@pytest.mark.parametrize("length", [3, 4])
def test_a_norm_read_through_merged_rows_keeps_one_reduction_per_row(cold_cache, length):
    """With a dynamic length t, the merged rows divide by 64 t to find the batch: the norm's
    reduction must still see that it depends on the row alone (sym._by_integer_factor) and run
    once per row, not once per element of it (64 times the work, as LLaMA's did)."""
    x, weight = torch.randn(2, length, 64), torch.randn(64)
    torch._dynamo.mark_dynamic(x, 1)
    torch.testing.assert_close(
        compiled(normed_rows_merged)(x, weight), normed_rows_merged(x, weight)
    )
    source = kernel_sources(cold_cache)
    assert "s" in source.split("void kernel_0(")[1].split(")")[0]  # the length is symbolic
    assert "for (int64_t i1 " not in source  # one loop over rows; the row's loops inside


@pytest.mark.parametrize("length", [1, 3, 4])
def test_a_norm_read_through_merged_rows_matches_eager_with_its_gradient(length):
    fn = compiled(normed_rows_merged)
    x = torch.randn(2, length, 64, requires_grad=True)
    weight = torch.randn(64, requires_grad=True)
    torch._dynamo.mark_dynamic(x, 1)
    grad = torch.randn(2 * length, 64)
    got = torch.autograd.grad(fn(x, weight), (x, weight), grad)
    want = torch.autograd.grad(normed_rows_merged(x, weight), (x, weight), grad)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


def softmax_read_by_three_kernels(x):
    shifted = x - x.amax(-1, keepdim=True)  # cheap: inlined into each output's kernel
    return shifted.exp(), shifted.sin(), shifted.cos()


def test_a_reduction_read_by_three_kernels_is_computed_at_most_twice(cold_cache):
    """The first kernel computes it inside; the second reads it from memory, so a cheap value
    inlined into many kernels does not recompute its reduction in each."""
    x = torch.randn(6, 10)
    torch.testing.assert_close(
        compiled(softmax_read_by_three_kernels)(x), softmax_read_by_three_kernels(x)
    )
    source = "".join(p.read_text() for p in cold_cache.glob("kernels/*/*.cpp"))
    assert source.count("reduction(max:") <= 2


@pytest.mark.parametrize("length", [1, 511, 512, 513, 1025, 200003])
def test_float_sums_are_as_accurate_as_eager(cold_cache, length):
    """Float sums accumulate in double. Float partial sums (chunks of 512 added in float, then
    in double: twice as fast) were tried and dropped: the fuzzer (seed 2711) found a sum fed to
    a float-to-int cast that landed one integer off from both eager and float64."""
    x = torch.rand(3, length)
    exact = x.double().sum(-1)
    got = compiled(lambda x: x.sum(-1) + 0)(x)
    eager_error = (x.sum(-1).double() - exact).abs().max().item()
    assert (got.double() - exact).abs().max().item() <= eager_error
    torch.testing.assert_close(got, x.sum(-1))


def sum_then_truncate(x):  # the fuzzer's finding, shrunk (seed 2711, program 243)
    return (x.sum(dim=[0, -2, 2]) - x).to(torch.int64)


def test_a_sum_fed_to_an_integer_cast_matches_eager(cold_cache, monkeypatch):
    monkeypatch.setenv("DICP_BOUNDS_CHECK", "1")  # as the fuzzer ran it
    x = (
        torch.randn(
            7, 28, 28, generator=torch.Generator().manual_seed(2735407451384), dtype=torch.float64
        )
        .mul(2)
        .float()
    )
    assert torch.equal(compiled(sum_then_truncate)(x), sum_then_truncate(x))


def test_group_norm_statistics_run_once_per_group(cold_cache):
    """A normalized channel reads its group's mean and variance at channel // 4. Fused into the
    loop over channels, each group's statistics were computed once per channel, 4 times here
    (8 times in a GroupNorm(8, 64): 3.3 times eager's time). They must run in a loop over
    groups: no kernel that reduces loops over the 12 channels."""
    x = torch.randn(2, 12, 5, 7)
    torch.testing.assert_close(compiled(lambda x: F.group_norm(x, 3))(x), F.group_norm(x, 3))
    kernels = kernel_sources(cold_cache).split('extern "C" void kernel_')[1:]
    reducing = [k for k in kernels if "acc" in k]
    assert reducing
    assert not any("< 12L;" in k for k in reducing)


def test_a_batch_norm_variance_read_twice_runs_once(dumps):
    """Training batch norm over an NCHW batch reads each channel's variance twice, for the
    scale that normalizes and for the running variance. Inlined into both readers, the
    variance's pass over the batch ran twice: it is written once (CppCodegen's
    _computes_reductions), and the training forward has two passes over the batch, the mean's
    and the variance's. Output and running statistics match eager's."""
    torch.manual_seed(0)
    x = torch.randn(4, 3, 5, 7)
    norms = [torch.nn.BatchNorm2d(3).train() for _ in range(2)]
    torch.testing.assert_close(compiled(norms[0])(x), norms[1](x))
    for name in ("running_mean", "running_var"):
        torch.testing.assert_close(getattr(norms[0], name), getattr(norms[1], name))
    (forward,) = dumps.glob("debug/*_forward_*/kernels.cpp")
    kernels = forward.read_text().split("graph_entry_")[0].split('extern "C" void kernel_')
    assert sum("acc" in k for k in kernels) == 2

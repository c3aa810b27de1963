"""Kernels never rely on memory two names might share.

`__restrict__` is kept only on kernels whose written buffers this graph allocated privately; an
in-place copy whose source may view its destination computes the source first. ATen graphs
with `copy_` left in place (AOTAutograd functionalizes them away today, a vendor pass or
another configuration may not) are built with make_fx and compiled directly."""

import re

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from dicp.bridge.pipeline.stages import GraphTransformer
from dicp.api import get_backend

from .helpers import BACKEND, cold_cache, compiled, warm_cache  # noqa: F401  (fixtures)

aten = torch.ops.aten


def compile_aten(fn, *inputs):
    """`fn` traced to a non-functional ATen graph (its copy_ stays) and built directly;
    returns the callable and the generated C++ source."""
    gm = make_fx(fn, tracing_mode="fake")(*inputs)
    transformer = GraphTransformer(gm, get_backend(BACKEND), "inference", list(inputs))
    call = transformer.build()
    return call, transformer.sources.files.get("kernels.cpp", "")


def shift_down(x):
    aten.copy_(aten.slice(x, 0, 1, None), aten.slice(x, 0, 0, -1) * 2)
    return (x + 0,)


def shift_up(x):
    aten.copy_(aten.slice(x, 0, 0, -1), aten.slice(x, 0, 1, None) * 2)
    return (x + 0,)


def transpose_in_place(x):
    aten.copy_(x, aten.permute(x, [1, 0]) + 1)
    return (x * 1,)


@pytest.mark.parametrize("fn", [shift_down, shift_up, transpose_in_place])
def test_copy_from_a_view_of_the_destination(warm_cache, fn):
    x = torch.randn(40, 40)
    call, _ = compile_aten(fn, x.clone())
    expected, got = x.clone(), x.clone()
    (expected_out,) = fn(expected)
    (got_out,) = call([got])
    assert torch.equal(got, expected)
    assert torch.equal(got_out, expected_out)


def add_other(x, y):
    aten.copy_(x, y * 2)
    return (x + 0,)


def test_copy_from_another_input_sharing_storage(warm_cache):
    """Inputs that are distinct names may view one storage (here y is x shifted by a row)."""
    call, source = compile_aten(add_other, torch.randn(8, 5), torch.randn(8, 5))
    for overlap in (True, False):
        base = torch.randn(9, 5)
        x, y = (base[1:], base[:-1]) if overlap else (base[1:], base[:-1].clone())
        expected_base = base.clone()
        expected_x = expected_base[1:]
        expected_x.copy_((expected_base[:-1] if overlap else y) * 2)
        call([x, y])
        assert torch.equal(base, expected_base), overlap


def signatures(source):
    return dict(re.findall(r'extern "C" void (kernel_\d+)\(([^)]*)\)', source))


def test_restrict_only_on_kernels_writing_private_buffers(warm_cache):
    _, source = compile_aten(add_other, torch.randn(8, 5), torch.randn(8, 5))
    kernels = signatures(source)
    writes_input = [k for k, sig in kernels.items() if "out_x_1" in sig]
    assert writes_input, source
    for name, signature in kernels.items():
        # the kernel writing the graph input x in place promises nothing
        assert ("__restrict__" in signature) == (name not in writes_input), (name, signature)


def test_aliased_graph_inputs_through_torch_compile(warm_cache):
    """Read-only aliasing inputs, an output viewing an input, and a mutated input aliasing
    another (AOTAutograd merges those into one base)."""

    def reads(a, b):
        return a + b, a.t()

    def mutates(a, b):
        a.mul_(2)
        return a + b

    for fn in (reads, mutates):
        base = torch.randn(6, 6)
        expected_base = base.clone()
        expected = fn(expected_base[1:], expected_base[:-1])
        got = compiled(fn)(base[1:], base[:-1])
        expected, got = (expected, got) if isinstance(got, tuple) else ((expected,), (got,))
        for e, g in zip(expected, got, strict=True):
            assert torch.equal(e, g), fn.__name__
        assert torch.equal(base, expected_base), fn.__name__


def _copy_between_inputs(x, y):
    x.copy_(y * 2)
    return x + 0


def _calls_with_and_without_overlap(compiled_fn, first_overlapping):
    """Per call (inputs sharing storage or not, in that order): whether the storage holds
    eager's values after it; or the exception the calls raised."""
    results = []
    try:
        for overlapping in (first_overlapping, not first_overlapping):
            base = torch.randn(9, 5)
            x, y = (base[1:], base[:-1]) if overlapping else (base[1:], base[:-1].clone())
            expected_base = base.clone()
            expected_base[1:].copy_((expected_base[:-1] if overlapping else y) * 2)
            compiled_fn(x, y)
            results.append(torch.equal(base, expected_base))
    except Exception as error:  # compared with aot_eager's below
        return type(error)
    return results


@pytest.mark.parametrize("first_overlapping", [False, True])
def test_a_compiled_copy_between_inputs_follows_their_overlap_at_each_call(
    cold_cache, first_overlapping
):
    """Through torch.compile: dynamo does not recompile when two inputs start (or stop) to
    share storage, so the copy_ AOTAutograd leaves in the graph must be right in either case.
    Where torch's own runtime refuses the second call (torch 2.11's synthetic-base wrapper
    raises for aot_eager and Inductor alike), dicp must raise it too, not compute silently."""
    torch._dynamo.reset()
    reference = _calls_with_and_without_overlap(
        torch.compile(_copy_between_inputs, backend="aot_eager"), first_overlapping
    )
    got = _calls_with_and_without_overlap(compiled(_copy_between_inputs), first_overlapping)
    if isinstance(reference, type):
        assert got is reference
    else:
        assert reference == [True, True]  # aot_eager is right: so must dicp be
        assert got == [True, True]

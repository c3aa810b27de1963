"""Tensors the forward saves for the backward, in the layout new_backendgraph made them.

A channels-last convolution's activations are returned channels-last rather than copied back
to the traced NCHW (`Backend.chooses_saved_layouts`); AOTAutograd is told their strides and
hands the backward compiler inputs with them, while the backward graph's placeholders still
carry the traced ones (`traced_layout.restride_inputs`). What reads an input's storage directly
(as_strided, an output viewing the input) must still address it as traced.
"""

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from dicp.api import get_backend
from dicp.bridge.entry import _graph_compiler

from .helpers import BACKEND, cold_cache, compiled, dumps, warm_cache  # noqa: F401  (fixtures)
from .helpers import wrapper_sources as wrappers

aten = torch.ops.aten


def _saved_4d_strides(out):
    """The strides of the 4-d tensors the compiled graph behind `out` saved for its backward."""
    fn = out.grad_fn
    while fn is not None and "Compiled" not in type(fn).__name__:
        fn = fn.next_functions[0][0]
    assert fn is not None, "no compiled autograd function behind the output"
    return [t.stride() for t in fn.saved_tensors if t.dim() == 4]


def test_a_convolutions_saved_activation_stays_channels_last(warm_cache):
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 8, 3, padding=1)
    pool = torch.nn.MaxPool2d(2)

    def loss(x):
        return pool(conv(x).relu()).square().sum()

    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    out = compiled(loss)(x)
    channels_last = torch.empty(2, 8, 8, 8).contiguous(memory_format=torch.channels_last)
    assert channels_last.stride() in _saved_4d_strides(out)
    out.backward()
    got = [x.grad.clone(), *(p.grad.clone() for p in conv.parameters())]
    x.grad = None
    conv.zero_grad()
    loss(x).backward()
    want = [x.grad, *(p.grad for p in conv.parameters())]
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)


@pytest.mark.parametrize("input_grad", [False, True])
def test_a_stems_backward_takes_its_nchw_input_channels_last(dumps, input_grad):
    """A convolution of the model's NCHW images, run channels-last, gets its gradient
    channels-last: its backward takes the images channels-last too, rather than ATen
    converting the (larger) gradient to NCHW. Gradients as eager's."""
    torch.manual_seed(0)
    stem = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1, bias=False), torch.nn.BatchNorm2d(16)
    )
    x = torch.randn(4, 3, 32, 32, requires_grad=input_grad)

    def loss(x):
        return stem(x).relu().square().mean()

    compiled(loss)(x).backward()
    got = [x.grad.clone()] if input_grad else []
    got += [p.grad.clone() for p in stem.parameters()]
    x.grad = None
    stem.zero_grad()
    loss(x).backward()
    want = ([x.grad] if input_grad else []) + [p.grad for p in stem.parameters()]
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)
    assert "ConvolutionBackwardNHWC" in wrappers(dumps)


def _as_strided_rows(x):
    return (aten.as_strided(x, [4, 6], [6, 1], 3) * 2,)


def _flat_view(x):
    return (aten.view(x, [-1]),)


def _doubled(x):
    return (x * 2,)


@pytest.mark.parametrize("fallback", ["", "aten.as_strided.*"])
@pytest.mark.parametrize("fn", [_as_strided_rows, _flat_view, _doubled])
def test_a_backward_input_in_another_layout_is_read_as_traced(
    warm_cache, monkeypatch, fn, fallback
):
    """A backward graph traced with an NCHW input and compiled for a channels-last one (as
    AOTAutograd restrides it): storage-addressing ops keep eager's reading of the traced
    layout, converted or left to eager ATen (DICP_FALLBACK_OPS), and everything else reads
    the real strides."""
    monkeypatch.setenv("DICP_FALLBACK_OPS", fallback)
    x = torch.randn(2, 3, 4, 5)
    gm = make_fx(fn, tracing_mode="fake")(x)
    (placeholder,) = gm.graph.find_nodes(op="placeholder")
    traced = placeholder.meta["val"]
    real_strides = x.contiguous(memory_format=torch.channels_last).stride()
    example = traced.as_strided(traced.shape, real_strides)
    call = _graph_compiler(get_backend(BACKEND), "backward")(gm, [example])
    (got,) = call([x.contiguous(memory_format=torch.channels_last)])
    (want,) = fn(x)
    torch.testing.assert_close(got, want, rtol=0, atol=0)

"""Pointwise kernels over the same loops run as one kernel (codegen/horizontal.py): an AdamW
update of a parameter computes both moments and the parameter in one loop; kernels that read
another element than the one a kernel of the group writes stay apart. Every case compares
with eager; the kernel counts read the native entries of DICP_DEBUG's dumps."""

import re

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from .helpers import cold_cache, compiled, dumps  # noqa: F401  (fixtures)

SHAPES = [(1,), (5,), (6, 7), (64, 64)]  # one element, odd, even, loops merged into one


def kernel_calls(cache, kind):
    """The kernel calls of the dumped graphs named `*_{kind}_*`: from their wrappers and
    from the native entries that run several."""
    calls = 0
    for graph in sorted(cache.glob(f"debug/*_{kind}_*")):
        calls += len(re.findall(r"kernels\.kernel_\d+\(", (graph / "wrapper.py").read_text()))
        for source in graph.glob("kernels*.cpp"):
            text = source.read_text()
            entries = text[text.index("graph_entry_") :] if "graph_entry_" in text else ""
            calls += len(re.findall(r"^\s+kernel_\d+(?:_pointer)?\(", entries, re.M))
    return calls


def adamw_steps(params, compile_step, steps=3, foreach=False):
    optimizer = torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1, foreach=foreach)
    step = compiled(optimizer.step) if compile_step else optimizer.step
    for i in range(steps):
        for p in params:
            p.grad = torch.linspace(-1, 1, p.numel()).view_as(p) * (i + 1) + p.detach()
        step()
    return [p.detach().clone() for p in params], optimizer


def fresh_params(storage_shared=False):
    torch.manual_seed(0)
    if not storage_shared:
        return [nn.Parameter(torch.randn(shape)) for shape in SHAPES]
    flat = torch.randn(sum(torch.Size(s).numel() for s in SHAPES))
    views, start = [], 0
    for shape in SHAPES:
        n = torch.Size(shape).numel()
        views.append(nn.Parameter(flat[start : start + n].view(shape)))
        start += n
    return views


@pytest.mark.parametrize("storage_shared", [False, True], ids=["own storages", "one storage"])
def test_an_adamw_update_is_one_kernel_per_parameter_and_matches_eager(dumps, storage_shared):
    """Parameters in storages of their own are updated in place (copy elision); views of one
    flat buffer (as a flat-parameter wrapper makes them) take the copy-back path."""
    got, opt = adamw_steps(fresh_params(storage_shared), compile_step=True)
    want, eager_opt = adamw_steps(fresh_params(storage_shared), compile_step=False)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)
    for p, q in zip(opt.param_groups[0]["params"], eager_opt.param_groups[0]["params"]):
        for key in ("exp_avg", "exp_avg_sq"):
            torch.testing.assert_close(opt.state[p][key], eager_opt.state[q][key])
    # each parameter's moments and update; the step counts (one scalar kernel each); views
    # of one storage get the update copied in (no other input may share an elided target)
    per_parameter = 3 if storage_shared else 2
    assert kernel_calls(dumps, "inference") == per_parameter * len(SHAPES)


def test_a_default_adamw_over_many_parameters_is_one_kernel_per_parameter(dumps):
    """AdamW's default (foreach) update computes every first moment, then every second, then
    every parameter: each parameter's group is held from the first op to the last, 40 groups
    at once (at most 32 were held, and a ViT's 40 parameters got their first moment apart)."""

    def params():
        torch.manual_seed(0)
        return [nn.Parameter(torch.randn(SHAPES[i % len(SHAPES)])) for i in range(40)]

    got, _ = adamw_steps(params(), compile_step=True, foreach=None)
    want, _ = adamw_steps(params(), compile_step=False, foreach=None)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)
    assert kernel_calls(dumps, "inference") == 2 * 40  # the update and the step count


def test_a_kernel_reading_another_element_stays_apart(dumps):
    """`pad(y[1:])` reads y's element i + 1 where the kernel writing y writes i: run in one
    loop, it would read an element not written yet."""

    def f(x):
        y = x * 2 + 1
        return y, F.pad(y[1:], (0, 1)) * x

    x = torch.randn(33)
    for got, want in zip(compiled(f)(x), f(x)):
        torch.testing.assert_close(got, want)
    assert kernel_calls(dumps, "inference") == 2


def test_kernels_sharing_an_input_run_as_one(dumps):
    """A value returned and read again, and a second function of the same input: one loop."""

    def f(x, w):
        y = torch.relu(x * w)
        return y, y > 0, (x - 1) * w

    x, w = torch.randn(8, 33), torch.randn(33)
    for got, want in zip(compiled(f)(x, w), f(x, w)):
        torch.testing.assert_close(got, want)
    assert kernel_calls(dumps, "inference") == 1


def test_an_activation_and_its_mask_join_the_normalization_across_other_kernels(dumps):
    """After a transposed convolution (NCHW), training batch norm's normalization, the
    activation and its saved mask are pointwise over one loop nest, with the running
    statistics' updates (kernels of their own, which touch none of their buffers) in between:
    the kernel storing the mask stores the normalized values and the activation too.
    Gradients match eager's."""
    torch.manual_seed(0)
    block = nn.Sequential(nn.ConvTranspose2d(4, 3, 4, 2, 1), nn.BatchNorm2d(3), nn.LeakyReLU())
    x = torch.randn(2, 4, 5, 5)
    loss = lambda y: (y * torch.linspace(-1, 1, y.numel()).view_as(y)).sum()
    loss(compiled(block)(x)).backward()
    got = [p.grad.clone() for p in block.parameters()]
    block.zero_grad()
    loss(block(x)).backward()
    for g, p in zip(got, block.parameters()):
        torch.testing.assert_close(g, p.grad, rtol=1e-4, atol=1e-4)
    (forward,) = dumps.glob("debug/*_forward_*/kernels.cpp")
    (signature,) = re.findall(r"void kernel_\d+\([^)]*uint8_t\* [^)]*\)", forward.read_text())
    assert len(re.findall(r"float\* (?:__restrict__ )?out_", signature)) >= 2, signature

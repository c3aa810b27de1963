"""DICP_NEW_BACKENDGRAPH_TARGET=python_loops: the C++ target's loop IR printed by the Python
renderer instead, run with no compiler. Every lowering family, compared with eager: the IR is
target-independent where both renderers agree with eager on it."""

import pytest
import torch
import torch.nn.functional as F

from .helpers import builds, compiled, warm_cache  # noqa: F401  (fixture)


def _x(*shape, dtype=torch.float32, seed=0):
    return (torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * 2).to(dtype)


PROGRAMS = {
    "pointwise": (
        lambda x: (torch.sigmoid(x) * torch.tanh(x)).clamp(-0.5, 0.5) // 0.1,
        lambda: [_x(5, 7)],
    ),
    "math functions": (
        lambda x: (
            x.sign(),
            (x.abs() + 0.1).log10(),
            torch.erfc(x),
            x.atan(),
            x.expm1(),
            x.exp2(),
            x.sinh(),
        ),
        lambda: [torch.cat([_x(9), torch.tensor([0.0, -0.0, float("nan")])])],
    ),
    "half types": (
        lambda x, y: (x.exp() + y.to(torch.float16)).to(torch.bfloat16) * 3,
        lambda: [_x(4, 6, dtype=torch.bfloat16), _x(4, 6, seed=1)],
    ),
    "integers": (
        lambda a, b: (
            a // b,
            a % b,
            (a * 3) ^ b,
            a.float() / b,
            a.pow(b - 3),
            (a.float() * 1.7).int(),
        ),
        lambda: [torch.arange(-7, 8), torch.tensor([2, -3, 5] * 5)],
    ),
    "reductions": (
        lambda x: (x.sum(1), x.amax(0), x.prod(1), x.argmax(1), (x > 0).any(1), x.std(1)),
        lambda: [
            torch.tensor(
                [[1.0, -0.0, 0.0, float("nan")], [0.0, -0.0, -2.0, 3.0], [2.0, 5.0, -1.0, 0.5]]
            )
        ],
    ),
    "softmax and layer norm": (
        lambda x, w: F.layer_norm(torch.softmax(x, -1), (9,), w),
        lambda: [_x(6, 9), _x(9, seed=2)],
    ),
    "column sum": (lambda x: x.sum(0), lambda: [_x(70, 66)]),
    "views, cat, pad, tril": (
        lambda x: torch.cat([x.t(), F.pad(x, (1, 2)).tril(1)[:, 1:6]], 0),
        lambda: [_x(5, 5)],
    ),
    "slice_scatter, arange, where": (
        lambda x: torch.where(x > 0, x.slice_scatter(x[:, ::2] * 2, 1, 0, 5, 2), torch.arange(6.0)),
        lambda: [_x(3, 6)],
    ),
    "gather, index, scatter_add, index_put": (
        lambda x, i: (
            torch.gather(x, 1, i),
            x[i[:, 0]],
            x.scatter_add(1, i, x[:, :3]),
            x.index_put((i[:, 0],), torch.tensor(5.0), accumulate=True),
        ),
        lambda: [_x(4, 5), torch.tensor([[0, 4, 0], [3, 3, 1], [2, 0, 2], [1, 1, 4]])],
    ),
    "cumsum": (lambda x: x.cumsum(1), lambda: [_x(3, 8)]),
    "pooling": (
        lambda x: (
            F.max_pool2d(x, 3, 2, 1),
            F.avg_pool2d(x, 2, ceil_mode=True),
            F.adaptive_avg_pool2d(x, (3, 2)),
        ),
        lambda: [_x(2, 3, 7, 6)],
    ),
    "transposed copy": (lambda x: (x * 2).t().contiguous(), lambda: [_x(20, 18)]),
}


@pytest.fixture
def python_loops(warm_cache, monkeypatch):
    monkeypatch.setenv("DICP_NEW_BACKENDGRAPH_TARGET", "python_loops")


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


@pytest.mark.parametrize("bounds_check", [False, True], ids=["plain", "bounds-checked"])
@pytest.mark.parametrize("program", PROGRAMS)
def test_python_loops_match_eager_without_a_build(python_loops, monkeypatch, program, bounds_check):
    if bounds_check:
        monkeypatch.setenv("DICP_BOUNDS_CHECK", "1")
    fn, make_inputs = PROGRAMS[program]
    before = builds()
    got, want = _flat(compiled(fn)(*make_inputs())), _flat(fn(*make_inputs()))
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, equal_nan=True)
    assert builds() == before


def test_python_loops_gradients(python_loops):
    def fn(x, w):
        return (F.gelu(x @ w).softmax(-1) * x[:, :1]).sum(0)

    x, w = _x(3, 4).requires_grad_(), _x(4, 5, seed=3).requires_grad_()
    got, want = compiled(fn)(x, w), fn(x, w)
    torch.testing.assert_close(got, want)
    grads = [torch.autograd.grad(out.sum(), (x, w)) for out in (got, want)]
    for g, e in zip(*grads):
        torch.testing.assert_close(g, e)


def test_python_loops_dynamic_shapes(python_loops):
    fn = compiled(lambda x: torch.softmax(x, -1).amax(0), dynamic=True)
    for rows, cols in ((3, 5), (4, 7)):
        x = _x(rows, cols)
        torch.testing.assert_close(fn(x), torch.softmax(x, -1).amax(0))

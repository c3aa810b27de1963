"""Higher-order ops whose graph holds subgraphs (torch.cond's branches, a while_loop's body, a
nested compile region, flex_attention's score_mod) compile and match eager.

Their subgraphs are GraphModule attributes of the graph, not tensors; the op itself runs as
eager fallback, with the subgraphs passed to it as they are."""

import pytest
import torch
from torch.nn.attention.flex_attention import flex_attention

from .helpers import compiled, warm_cache  # noqa: F401  (fixture)

DYNAMIC = pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])


def branching(x, w):
    z = x @ w
    picked = torch.cond(z.sum() > 0, lambda a: (a.sin() * 2).relu(), lambda a: a.cos() * a, (z,))
    return (picked + 1).sum()


@DYNAMIC
@pytest.mark.parametrize("sign", [1, -1], ids=["true_branch", "false_branch"])
def test_cond_value_and_gradients_match_eager(warm_cache, dynamic, sign):
    x = (sign * torch.rand(4, 8)).requires_grad_()
    w = torch.rand(8, 3).requires_grad_()
    loss = compiled(branching, dynamic=dynamic)(x, w)
    grads = torch.autograd.grad(loss, (x, w))
    eager_loss = branching(x, w)
    eager_grads = torch.autograd.grad(eager_loss, (x, w))
    torch.testing.assert_close(loss, eager_loss)
    for grad, eager_grad in zip(grads, eager_grads, strict=True):
        torch.testing.assert_close(grad, eager_grad)


def doubling_loop(x):
    from torch._higher_order_ops.while_loop import while_loop  # no public name in torch 2.13

    return while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * 2 + 1), (torch.tensor(0), x))


@torch.compiler.nested_compile_region
def region(x):
    return torch.sin(x) * 2 + 1


def twice_through_region(x):
    return region(x) + region(x * 2)


def relative_position_attention(q, k, v):
    return flex_attention(q, k, v, score_mod=lambda s, b, h, qi, ki: s + (qi - ki) * 0.1)


CASES = {
    "while_loop": (doubling_loop, lambda: (torch.randn(5),)),
    "nested_compile_region": (twice_through_region, lambda: (torch.randn(5, 6),)),
    "flex_attention": (
        relative_position_attention,
        lambda: tuple(torch.randn(1, 2, 16, 8) for _ in range(3)),
    ),
}


@DYNAMIC
@pytest.mark.parametrize("case", list(CASES))
def test_subgraph_ops_match_eager(warm_cache, dynamic, case):
    fn, make_inputs = CASES[case]
    inputs = make_inputs()
    torch.testing.assert_close(compiled(fn, dynamic=dynamic)(*inputs), fn(*inputs))

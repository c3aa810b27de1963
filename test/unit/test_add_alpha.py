"""add/sub/rsub with alpha compute `a op alpha * b` as eager does: in the result's type (a bool
result reads alpha as a bool; int8 + alpha * bool stays int8), and for float16/bfloat16 in
float32 with the numbers rounded to the half type, rounded once at the end. Found by the
fuzzer: `torch.add(bool, bool, alpha=-1)` returned int64 `a - b` where eager returns `a | b`."""

import pytest
import torch

from .helpers import cold_cache, compiled  # noqa: F401  (fixture)

HALF_PROGRAMS = {
    "add": lambda a, b: torch.add(a, b, alpha=0.1),
    "sub": lambda a, b: torch.sub(a, b, alpha=-2.5),
    "rsub": lambda a, b: torch.rsub(a, b, alpha=0.3),
    "add_number": lambda a, b: torch.add(a, 0.7, alpha=0.1),
    "rsub_number": lambda a, b: torch.rsub(a, 0.7, alpha=0.1),
}


def _assert_identical(got, want):
    assert got.dtype == want.dtype
    differing = (got != want).sum().item()
    assert differing == 0, f"{differing} of {want.numel()} elements differ from eager"


@pytest.mark.parametrize("alpha", [-1, 0, 2, False])
def test_bool_result_reads_alpha_as_bool(cold_cache, alpha):
    x, y = torch.rand(7, 5) < 0.5, torch.rand(5) < 0.5
    fn = lambda a, b: torch.add(a, b, alpha=alpha)
    _assert_identical(compiled(fn)(x, y), fn(x, y))


def test_integer_result_keeps_its_type(cold_cache):
    x, y = torch.randint(-100, 100, (9,), dtype=torch.int8), torch.rand(9) < 0.5
    fn = lambda a, b: torch.add(a, b, alpha=3)
    _assert_identical(compiled(fn)(x, y), fn(x, y))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", HALF_PROGRAMS)
def test_half_types_round_once(cold_cache, name, dtype):
    # 4096 elements: a multiple of every vector width, so eager's vectorized loop computes all
    # of them (its scalar remainder loop rounds alpha * b first, the tail differs from its body)
    generator = torch.Generator().manual_seed(0)
    a, b = (torch.randn(4096, generator=generator).to(dtype) for _ in range(2))
    fn = HALF_PROGRAMS[name]
    _assert_identical(compiled(fn)(a, b), fn(a, b))


@pytest.mark.parametrize("size", [1, 7, 8])
def test_gradients_match_eager(cold_cache, size):
    fn = lambda a, b: (torch.sub(a, b, alpha=-2.5) * torch.add(b, a, alpha=0.5)).sum()
    inputs = [torch.randn(size, 3, requires_grad=True) for _ in range(2)]
    got = torch.autograd.grad(compiled(fn)(*inputs), inputs)
    want = torch.autograd.grad(fn(*inputs), inputs)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)

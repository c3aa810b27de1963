"""A scalar operand of a float16/bfloat16 binary op (a Python number, or a 0-d tensor of a wider
type, which does not take part in type promotion) is exactly as precise as in eager: eager's CPU
kernels round it to the half type, except the second operand of mul and div (true, floor,
trunc), which they read in float. Rounding it the other way moves floor_divide, remainder and
fmod across a step: found by the fuzzer (bfloat16 `x // y` with a float32 0-d `y`)."""

import pytest
import torch

OPS = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "floor_divide": torch.floor_divide,
    "trunc_div": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "remainder": torch.remainder,
    "fmod": torch.fmod,
    "lt": torch.lt,
}
SCALAR_FIRST = ["add", "sub", "mul", "div"]


def _scalar(kind):
    value = 1.1237  # not a bfloat16 or float16 number: rounding it shows
    return value if kind == "number" else torch.tensor(value)


def _check(fn, dtype):
    x = (torch.randn(8, 257, generator=torch.Generator().manual_seed(0)) * 3).to(dtype)
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="new_backendgraph")(x)
    expected = fn(x)
    assert compiled.dtype == expected.dtype
    differing = (compiled != expected).sum().item()
    assert differing == 0, f"{differing} of {x.numel()} elements differ from eager"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("kind", ["number", "0-d float32 tensor"])
@pytest.mark.parametrize("op", list(OPS))
def test_scalar_second_operand(op, kind, dtype):
    scalar = _scalar(kind)
    _check(lambda x: OPS[op](x, scalar), dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("op", SCALAR_FIRST)
def test_number_first_operand(op, dtype):
    _check(lambda x: OPS[op](1.1237, x), dtype)


# An integer tensor clamped to a float number is float, with the number itself as the bound.
CLAMPS = {
    "clamp": lambda x: torch.clamp(x, min=-1.5, max=2.5),
    "clamp_min": lambda x: torch.clamp_min(x, 1.5),
    "clamp_max": lambda x: torch.clamp_max(x, -0.5),
}


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
@pytest.mark.parametrize("op", list(CLAMPS))
def test_an_integer_tensor_clamped_to_a_float_number(op, dtype):
    _check(CLAMPS[op], dtype)

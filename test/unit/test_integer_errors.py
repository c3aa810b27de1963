"""Integer arithmetic eager refuses is refused: division by zero in a generated kernel raises
ZeroDivisionError, as eager does, instead of trapping (x86's integer divide raises SIGFPE and
the process died, exit 136); an integer to a negative power raises eager's error."""

import pytest
import torch

from .helpers import cold_cache, compiled  # noqa: F401  (fixture)

DIVISIONS = {
    "floor_divide": lambda a, b: a // b,
    "remainder": lambda a, b: a % b,
    "fmod": torch.fmod,
    "trunc_divide": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
}


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
@pytest.mark.parametrize("op", DIVISIONS)
@pytest.mark.parametrize("dynamic", [False, True])
def test_integer_division_by_zero_raises_and_the_graph_runs_again(cold_cache, op, dtype, dynamic):
    a = torch.tensor([7, 8, 9, 10, 11], dtype=dtype)
    b = torch.tensor([2, 0, 4, 3, 5], dtype=dtype)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        DIVISIONS[op](a, b)  # eager's error
    fn = compiled(DIVISIONS[op], dynamic=dynamic)
    with pytest.raises(ZeroDivisionError, match="integer division by zero"):
        fn(a, b)
    nonzero = b + 1
    torch.testing.assert_close(fn(a, nonzero), DIVISIONS[op](a, nonzero))  # nothing left set


def test_a_division_in_a_native_entry_of_several_kernels_raises(cold_cache):
    def graph(a, b):
        return (a // b).float().softmax(-1) + a.float().sum(0)

    a, b = torch.randint(-9, 9, (4, 8)), torch.randint(1, 5, (4, 8))
    fn = compiled(graph)
    torch.testing.assert_close(fn(a, b), graph(a, b))
    b[2, 3] = 0
    with pytest.raises(ZeroDivisionError):
        fn(a, b)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_the_most_negative_value_over_minus_one_wraps_as_in_eager(cold_cache, dtype):
    """x86 traps on it too; eager's floor division gives the value itself, its remainder 0."""

    def graph(a, b):
        return a // b, a % b, torch.fmod(a, b)

    smallest = torch.iinfo(dtype).min
    a, b = torch.tensor([smallest, 7, -7], dtype=dtype), torch.tensor([-1, -1, -1], dtype=dtype)
    for got, want in zip(compiled(graph)(a, b), graph(a, b), strict=True):
        torch.testing.assert_close(got, want)


def test_an_integer_to_a_negative_power_raises_as_in_eager(cold_cache):
    a = torch.tensor([2, 3, 1, -1, 0])
    with pytest.raises(RuntimeError, match="negative integer powers"):
        a**-1  # eager's error
    with pytest.raises(Exception, match="Integers to negative integer powers are not allowed"):
        compiled(lambda a: a**-1)(a)
    torch.testing.assert_close(compiled(lambda a: a**2)(a), a**2)

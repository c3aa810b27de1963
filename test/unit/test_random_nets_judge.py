"""test/scripts/random_nets.py's judge (`problems`): a compiled result passes when it is off
eager's only as far as eager is off the float64 run. A NaN or inf must not make that
comparison vacuous: `(x - y).abs().max()` is NaN when one side holds a NaN, and no comparison
with NaN fails, so a NaN in the compiled result passed unseen; an inf in eager's result made
the tolerance (scaled by eager's largest value) unbounded."""

import sys

import torch

from .helpers import REPO

sys.path.insert(0, str(REPO / "test" / "scripts"))
try:
    import random_nets
finally:
    sys.path.pop(0)

NAN, INF = float("nan"), float("inf")
EXACT = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)


def problems(ours, eagers, exact=EXACT):
    return random_nets.problems([torch.tensor(ours)], [torch.tensor(eagers)], [exact])


def test_a_nan_only_the_compiled_result_holds_fails():
    assert problems([1.0, NAN, 3.0], [1.0, 2.0, 3.0])


def test_an_error_elsewhere_fails_though_eager_overflowed_to_inf():
    assert problems([1.0, 2.0, 9.0], [1.0, INF, 3.0])


def test_a_finite_value_where_the_exact_result_is_nan_fails():
    assert problems([1.0, 5.0, 3.0], [1.0, NAN, 3.0], torch.tensor([1.0, NAN, 3.0]).double())


def test_where_eager_overflowed_and_the_exact_result_is_finite_any_value_passes():
    assert not problems([1.0, 2.0, 3.0], [1.0, NAN, 3.0])
    assert not problems([1.0, 2.5, 3.0], [1.0, INF, 3.0])


def test_the_same_inf_and_nan_in_both_pass():
    exact = torch.tensor([INF, NAN, 3.0], dtype=torch.float64)
    assert not problems([INF, NAN, 3.0], [INF, NAN, 3.0], exact)


def test_an_error_beyond_eagers_fails_and_one_within_passes():
    assert problems([1.0, 2.1, 3.0], [1.0, 2.0, 3.0])
    assert not problems([1.0, 2.00001, 3.0], [1.0, 2.00002, 3.0])

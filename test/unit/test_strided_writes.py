"""as_strided_scatter: the views the conversion cannot show to write each element of a dense
storage once go to eager, which equals eager's result (overlapping writes included); the ones
it takes write natively. The op suite (test_as_strided_scatter.py) tests values and gradients."""

import pytest
import torch

from dicp.bridge.pipeline.fallback import observe_fallbacks

from .helpers import compiled, warm_cache  # noqa: F401  (fixture)

OP = "aten.as_strided_scatter.default"


def scatter(size, stride, offset=0):
    def fn(base, src):
        return torch.as_strided_scatter(base * 1, src * 2, size, stride, offset)

    return fn


NATIVE = {  # base shape, src shape, view
    "rows of a flat buffer": ((12,), (3, 4), scatter((3, 4), (4, 1))),
    "a transpose": ((3, 4), (4, 3), scatter((4, 3), (1, 4))),
    # the copy of the base and the stores run over the same loops at other addresses: one
    # loop would overwrite stored elements with the copy's (horizontal fusion keeps them apart)
    "a square transpose": ((5, 5), (5, 5), scatter((5, 5), (1, 5))),
    "every other element, the last one": ((9,), (4,), scatter((4,), (2,), 2)),
    "no elements": ((5,), (0, 3), scatter((0, 3), (3, 1), 4)),
}
TO_EAGER = {
    "overlapping rows": ((6,), (3, 2), scatter((3, 2), (1, 1))),
    "rows overlapping by one": ((8,), (2, 3), scatter((2, 3), (2, 1))),
    "a transposed base": (
        (4, 3),
        (2, 2),
        lambda b, s: torch.as_strided_scatter(b.t(), s, (2, 2), (1, 4)),
    ),
}


def _run(case, dynamic):
    base_shape, src_shape, fn = case
    base, src = torch.randn(base_shape), torch.randn(src_shape)
    with observe_fallbacks() as seen:
        got = compiled(fn, dynamic)(base, src)
    torch.testing.assert_close(got, fn(base, src), rtol=0, atol=0)
    return [f for f in seen if f.op == OP]


@pytest.mark.parametrize("case", NATIVE)
def test_views_writing_each_element_once_run_natively(case, warm_cache):
    assert _run(NATIVE[case], dynamic=False) == []


@pytest.mark.parametrize("case", TO_EAGER)
def test_other_views_go_to_eager_naming_why(case, warm_cache):
    (fallback,) = _run(TO_EAGER[case], dynamic=False)
    assert "once" in fallback.reason or "contiguous" in fallback.reason, fallback.reason


def test_a_buffer_of_an_unrelated_symbolic_size_goes_to_eager(warm_cache):
    """Under dynamic shapes the view's reach is compared with the buffer's size without a
    guard: a buffer whose size is a symbol of its own cannot be shown large enough."""

    def fn(base, src):
        return torch.as_strided_scatter(base, src, src.shape, (src.shape[1], 1))

    base, src = torch.randn(24), torch.randn(4, 6)
    with observe_fallbacks() as seen:
        got = compiled(fn, dynamic=True)(base, src)
    torch.testing.assert_close(got, fn(base, src), rtol=0, atol=0)
    assert [f.op for f in seen] == [OP]


def test_a_view_past_the_end_raises_as_eager_does(warm_cache):
    """Positions 2, 4 and 6 of six elements: eager refuses the view, and so does the compiled
    function (tracing runs the op's shape check), where a kernel would write past the buffer."""
    fn = scatter((3,), (2,), 2)
    base, src = torch.randn(6), torch.randn(3)
    with pytest.raises(RuntimeError, match="out of bounds"):
        fn(base, src)
    with pytest.raises(RuntimeError, match="out of bounds"):
        compiled(fn)(base, src)

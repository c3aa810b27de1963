"""A graph input the graph writes (an optimizer's parameter and state, a batch norm's running
statistics) gets its new value computed in its own memory where nothing reads its old value
afterwards (wrapper_memory._elide_copies), instead of into a temporary copied in at the end.
Each case runs compiled and eager on copies of the same inputs and compares every input
afterwards and every output: cases that must keep the copy (an old value read after the new
one is computed, elements read elsewhere than where they are written, inputs sharing a
storage, the mutated input returned) as much as those that drop it. Sizes 1, odd and even."""

import pytest
import torch
import torch.nn as nn

from .helpers import allocates, cold_cache, compiled, dumps, wrapper_sources  # noqa: F401


@pytest.fixture
def strict(dumps, monkeypatch):
    monkeypatch.setenv("DICP_STRICT", "1")  # a fallback to eager would test nothing
    return dumps


def sgd_momentum(p, m, g):
    m.mul_(0.9).add_(g)
    p.add_(m, alpha=-0.1)


def old_value_read_after(p, m, g):
    before = p * 2  # read after p's new value is computed
    p.add_(g)
    m.copy_(before + p)
    return before - 1


def shifted_self_assignment(p, m, g):
    p[1:] = p[:-1] * 2 + g[1:]  # element i's new value reads element i - 1


def reversed_read(p, m, g):
    p.copy_(p + p.flip(0) * g)


def returned_after_update(p, m, g):
    p.mul_(m)
    return p


def new_value_in_a_product(p, m, g):
    p.sub_(g * 0.5)
    return p.t() @ m  # reads the new value (the copy's source)


def old_value_in_a_product(p, m, g):
    out = p.t() @ m  # a library call reading the old value, before the update
    p.sub_(g * 0.5)
    return out


CASES = {
    # name -> (function, whether the new values need no buffer of their own)
    "sgd with momentum": (sgd_momentum, True),
    "old value read after the update": (old_value_read_after, False),
    "shifted self-assignment": (shifted_self_assignment, False),
    "reversed read": (reversed_read, False),
    "updated input returned": (returned_after_update, False),
    "new value in a product": (new_value_in_a_product, False),
    "old value in a product": (old_value_in_a_product, False),
}


def _inputs(rows):
    torch.manual_seed(0)
    return [torch.randn(rows, 3) for _ in range(3)]


def _check(fn, inputs, dynamic):
    mine = [t.clone() for t in inputs]
    got = compiled(fn, dynamic=dynamic)(*mine)
    want = fn(*inputs)
    torch.testing.assert_close(got, want)
    for g, w in zip(mine, inputs, strict=True):
        torch.testing.assert_close(g, w)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("rows", [1, 7, 16])
@pytest.mark.parametrize("case", sorted(CASES))
def test_updated_inputs_and_outputs_equal_eagers(strict, case, rows, dynamic):
    fn, in_place = CASES[case]
    _check(fn, _inputs(rows), dynamic)
    if in_place:  # the new values computed into the inputs: no temporary to copy from
        assert not allocates(wrapper_sources(strict))


@pytest.mark.parametrize("layout", ["one storage, apart", "one storage, overlapping"])
def test_inputs_sharing_a_storage(strict, layout):
    """Two inputs on one storage: the one written keeps its copy, and the other reads its
    elements as eager does (AOTAutograd passes overlapping ones as one base, written with
    as_strided_scatter)."""
    torch.manual_seed(0)
    base = torch.randn(33)
    shift = 16 if layout == "one storage, apart" else 1

    def fn(a, b):
        a.mul_(2)
        return b + 1

    mine = base.clone()
    got = compiled(fn)(mine[:16], mine[shift : shift + 16])
    want = fn(base[:16], base[shift : shift + 16])
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(mine, base)


@pytest.mark.parametrize("channels", [1, 5, 16])
def test_batch_norm_running_statistics_and_gradients(strict, channels):
    """A training forward updates the running statistics (inputs of the forward graph) while
    the gradient flows through the batch statistics."""
    torch.manual_seed(0)
    eager = nn.BatchNorm2d(channels).train()
    mine = nn.BatchNorm2d(channels).train()
    mine.load_state_dict(eager.state_dict())
    x = torch.randn(4, channels, 3, 5, requires_grad=True)
    x_mine = x.detach().clone().requires_grad_()
    step = compiled(mine)
    for _ in range(2):
        got, want = step(x_mine), eager(x)
        torch.testing.assert_close(got, want)
        (g_got,) = torch.autograd.grad(got.square().sum(), x_mine)
        (g_want,) = torch.autograd.grad(want.square().sum(), x)
        torch.testing.assert_close(g_got, g_want)
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        torch.testing.assert_close(getattr(mine, name), getattr(eager, name))


def test_inputs_that_share_a_storage_only_when_run(strict):
    """Traced apart, the new value is computed in the input's memory; run on inputs viewing
    one storage (dynamo does not recompile for that), the graph computes it in memory of its
    own and copies it in at the end, as eager does (elided, g's elements would be read after
    p's writes overwrote them)."""
    from torch._dynamo.utils import counters

    def fn(p, g):
        p.copy_(g * 2 + p)

    step = compiled(fn)
    counters.clear()
    step(torch.randn(8, 5), torch.randn(8, 5))
    assert not allocates(wrapper_sources(strict))
    base = torch.randn(9, 5)
    want = base.clone()
    fn(want[1:], want[:-1])
    step(base[1:], base[:-1])
    assert counters["stats"]["unique_graphs"] == 1  # the graph traced apart ran
    assert torch.equal(base, want)


def cache_update_then_attention(k_cache, v_cache, position, k, v, q):
    """A static key and value cache's update and read (transformers' StaticCache): each
    index_copy_ is an index_put into a copy of the cache that attention reads, then copied
    back into the cache input."""
    k_cache.index_copy_(2, position, k)
    v_cache.index_copy_(2, position, v)
    return torch.nn.functional.scaled_dot_product_attention(q, k_cache, v_cache)


def _cache_inputs(length, new):
    gen = torch.Generator().manual_seed(0)
    caches = [torch.randn(1, 2, length, 8, generator=gen) for _ in range(2)]
    position = torch.randperm(length, generator=gen)[:new]
    return [*caches, position, *(torch.randn(1, 2, new, 8, generator=gen) for _ in range(3))]


@pytest.mark.parametrize("length, new", [(1, 1), (7, 2), (16, 1)])
def test_a_cache_is_updated_in_its_own_memory_before_attention_reads_it(strict, length, new):
    """Attention's results are new memory (opset.FRESH_RESULTS), so the caches it reads stay
    the wrapper's own and the copy back goes: no cache-sized buffer, and the kernel copying
    the cache into the index_put's target returns at once when that target is the cache
    (loop_ir.copy_onto) instead of copying every position at every token."""
    inputs = _cache_inputs(length, new)
    _check(cache_update_then_attention, inputs, dynamic=False)
    wrapper = wrapper_sources(strict)
    assert not allocates(wrapper, f"(1, 2, {length}, 8)"), wrapper
    assert "the copy is onto itself" in "".join(
        p.read_text() for p in strict.glob("kernels/*/*.cpp")
    )


def test_caches_sharing_a_storage_are_updated_as_eager_does(strict):
    """Run on caches that view one storage, the graph computes the new caches in memory of
    its own and copies them back (the copy kernel runs: its source is not its destination)."""
    step = compiled(cache_update_then_attention)
    step(*_cache_inputs(7, 2))
    base = torch.randn(1, 2, 15, 8)
    want = base.clone()
    _, _, position, k, v, q = _cache_inputs(7, 2)
    expected = cache_update_then_attention(want[:, :, :7], want[:, :, 8:], position, k, v, q)
    got = step(base[:, :, :7], base[:, :, 8:], position, k, v, q)
    torch.testing.assert_close(got, expected)
    assert torch.equal(base, want)


def _copy_kernel(load_at, store_at, storage="float"):
    from dicp.vendor.new_backendGraph.codegen import loop_ir as L

    i, value = L.Var("i0", "int64_t"), L.Var("t0", "float")
    body = (
        L.Let(value, L.Load("in_x", load_at(i), storage, "float")),
        L.Store("out_y", store_at(i), storage, value),
    )
    params = (L.Param("out_y", storage, "y", True), L.Param("in_x", storage, "x"))
    return L.Kernel("k", params, (), False, (L.Loop(i, 0, 8, body),))


def test_only_a_copy_at_the_same_positions_returns_when_onto_itself():
    """A copy reading each element where it writes it changes nothing onto itself; a shifted
    copy does: it must run."""
    import sympy

    from dicp.vendor.new_backendGraph.codegen.loop_ir import copy_onto

    at = sympy.Symbol("i0", integer=True, nonnegative=True)
    same = _copy_kernel(lambda i: at, lambda i: at)
    assert copy_onto(same) == ("out_y", "in_x")
    assert copy_onto(_copy_kernel(lambda i: at, lambda i: at + 1)) is None
    assert copy_onto(_copy_kernel(lambda i: at + 1, lambda i: at)) is None


def test_inputs_apart_in_one_storage_when_run_are_updated_in_their_memory(strict):
    """Traced apart and run on views of one flat buffer that do not overlap (a flat-parameter
    wrapper's), the new value is computed in the input's memory (aliasing.RangesApart: what
    the in-place write needs is ranges apart, not storages) and equals eager's."""
    from torch._dynamo.utils import counters

    def fn(p, m, g):
        sgd_momentum(p, m, g)

    step = compiled(fn)
    counters.clear()
    step(torch.randn(8, 5), torch.randn(8, 5), torch.randn(8, 5))
    assert "RangesApart(" in wrapper_sources(strict)
    flat = torch.randn(121)
    want = flat.clone()
    views = lambda t: (t[:40].view(8, 5), t[40:80].view(8, 5), t[81:].view(8, 5))
    fn(*views(want))
    step(*views(flat))
    assert counters["stats"]["unique_graphs"] == 1
    torch.testing.assert_close(flat, want)


def test_dynamic_shapes_test_storages_as_before(strict):
    """A size that changes from call to call changes an input's range: the test stays the
    storage test (aliasing.storages_apart)."""

    def fn(p, m, g):
        sgd_momentum(p, m, g)

    step = compiled(fn, dynamic=True)
    for n in (5, 8):
        mine = [torch.randn(n) for _ in range(3)]
        want = [t.clone() for t in mine]
        step(*mine)
        fn(*want)
        for got, expected in zip(mine, want):
            torch.testing.assert_close(got, expected)
    wrappers = wrapper_sources(strict)
    assert "storages_apart(" in wrappers and "RangesApart(" not in wrappers


def _elements(t):
    """The addresses of `t`'s elements."""
    offsets = torch.zeros((), dtype=torch.int64)
    for size, stride in zip(t.shape, t.stride()):
        offsets = offsets.unsqueeze(-1) + torch.arange(size) * stride
    return set((t.data_ptr() + offsets.flatten() * t.element_size()).tolist())


def _span(t):
    if t.numel() == 0:
        return 0
    return (1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))) * t.element_size()


def test_ranges_apart_never_misses_a_shared_element():
    """Random views, written ones (targets) and read ones (others): whenever a target shares
    an element with another tensor, RangesApart says they are not apart, and dense views
    sharing no element are apart. Each tester sees its views move from call to call the way
    that tests what it remembers: the others elsewhere (as gradients are, new each step),
    the same memory again, the others onto the targets' buffer, all onto another buffer."""
    from dicp.bridge.pipeline.aliasing import RangesApart

    gen = torch.Generator().manual_seed(0)

    def draw(n):
        return int(torch.randint(0, n, (), generator=gen))

    def views(base, layouts):
        return [base.as_strided((size,), (stride,), start) for size, stride, start in layouts]

    outcomes = set()
    for _ in range(300):
        layouts = []
        for _ in range(1 + draw(4)):
            size, stride = draw(5), 1 + draw(3)
            layouts.append((size, stride, draw(40 - max(size - 1, 0) * stride)))
        count = 1 + draw(len(layouts))  # the first `count` are targets
        one_buffer = views(torch.empty(40), layouts)
        addresses = [_elements(t) for t in one_buffer]
        dense = all(_span(t) == len(_elements(t)) * 4 for t in one_buffer)
        among_targets = any(addresses[i] & addresses[j] for i in range(count) for j in range(i))
        shared = among_targets or any(
            addresses[i] & addresses[j] for i in range(count) for j in range(count, len(layouts))
        )
        test = RangesApart(
            tuple(map(_span, one_buffer[:count])), tuple(map(_span, one_buffer[count:]))
        )
        a, b, c = (views(torch.empty(40), layouts) for _ in range(3))
        for targets, others, overlapping in [
            (a[:count], c[count:], among_targets),
            (a[:count], c[count:], among_targets),
            (a[:count], a[count:], shared),
            (b[:count], b[count:], shared),
            (b[:count], c[count:], among_targets),
        ]:
            apart = test(targets, others)
            assert not (overlapping and apart)
            assert apart or overlapping or not dense
            outcomes.add((overlapping, apart))
    assert {(True, False), (False, True)} <= outcomes  # both answers were tested

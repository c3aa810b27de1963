"""Every op that writes through indices (issue 18), forward and backward, against eager.

Each case is compiled static and dynamic and run at sizes 1, odd and even with indices that
repeat, under four OpenMP threads (the generated kernels share torch's OpenMP runtime, so
torch.set_num_threads sets their thread count too): the loops large enough to run in parallel
(the 3-d pools' backward at sizes 7 and 8) then do, where a race would show; the others run on
one thread whatever the count. A pass on one thread would run the same loops serially and cost a
recompile (dynamo guards on the count). Each case also guards the generated C++: a store through
a computed (data-dependent) index under `omp simd` must be indexed by the SIMD loop's variable,
through computed indices that do not depend on it (then every lane stores to its own element),
and a parallel loop in such a kernel must be one its stores are indexed by (each thread then
writes its own elements). Stores that collide under SIMD lose updates only where the CPU has
scatter instructions (AVX-512), so the guard reads the source instead of trusting this machine.
"""

import re

import pytest
import torch
import torch.nn.functional as F

from dicp import config as dicp_config
from dicp.bridge.cache.build import loaded_libraries

from .helpers import compiled, warm_cache  # noqa: F401  (fixture)

SIZES = (1, 7, 8)
THREADS = 4


def repeated(high, count, generator):
    """`count` indices below `high` in which some index repeats (when count > 1)."""
    index = torch.randint(high, (count,), generator=generator)
    if count > 1:
        index[-1] = index[0]
    return index


def scatter_inputs(n, g):
    x, src = torch.randn(3, n + 2, generator=g), torch.randn(3, n + 2, generator=g)
    index = torch.stack([repeated(n + 2, n + 2, g) for _ in range(3)])
    return x, index, src


def permutation_rows(rows, n, g):
    return torch.stack([torch.randperm(n, generator=g) for _ in range(rows)])


def index_inputs(n, g):
    x, values = torch.randn(n + 3, 4, generator=g), torch.randn(n + 1, 4, generator=g)
    return x, repeated(n + 3, n + 1, g), values


def pool_input(n, g, dims=2):
    return (torch.randn((2, 3) + (n,) * dims, generator=g),)


# name -> (fn(*inputs), make_inputs(n, generator)). Float inputs get gradients.
CASES = {
    "scatter_value": (lambda x, i: x.scatter(1, i, 2.5), lambda n, g: scatter_inputs(n, g)[:2]),
    "scatter_src": (
        lambda x, i, s: x.scatter(1, i, s),  # a permutation: one writer each
        lambda n, g: (
            torch.randn(3, n, generator=g),
            permutation_rows(3, n, g),
            torch.randn(3, n, generator=g),
        ),
    ),
    "scatter_add": (lambda x, i, s: x.scatter_add(1, i, s), scatter_inputs),
    "scatter_add_dim0": (lambda x, i, s: x.t().scatter_add(0, i.t(), s.t()), scatter_inputs),
    **{
        f"scatter_reduce_{reduce}_{'self' if include else 'noself'}": (
            lambda x, i, s, reduce=reduce, include=include: x.scatter_reduce(
                1, i, s, reduce, include_self=include
            ),
            scatter_inputs,
        )
        for reduce in ("sum", "prod", "mean", "amax", "amin")
        for include in (True, False)
    },
    "index_put_accumulate": (lambda x, i, v: x.index_put((i,), v, accumulate=True), index_inputs),
    "index_put_value": (
        lambda x, i: x.index_put((i,), torch.tensor(3.0)),  # equal writes
        lambda n, g: index_inputs(n, g)[:2],
    ),
    "index_add": (lambda x, i, v: x.index_add(0, i, v, alpha=1.5), index_inputs),
    "index_copy": (
        lambda x, i, v: x.index_copy(0, i, v),
        lambda n, g: (
            torch.randn(n + 3, 4, generator=g),
            torch.randperm(n + 3, generator=g)[: n + 1],
            torch.randn(n + 1, 4, generator=g),
        ),
    ),
    "getitem_backward": (lambda x, i: x[i] * 2, lambda n, g: index_inputs(n, g)[:2]),
    "gather_backward": (lambda x, i: torch.gather(x, 1, i), lambda n, g: scatter_inputs(n, g)[:2]),
    "index_select_backward": (
        lambda x, i: x.index_select(0, i),
        lambda n, g: index_inputs(n, g)[:2],
    ),
    "take_backward": (
        lambda x, i: torch.take(x, i),
        lambda n, g: (torch.randn(3, n, generator=g), repeated(3 * n, 2 * n + 1, g)),
    ),
    "embedding_backward": (
        lambda w, i: F.embedding(i, w),
        lambda n, g: (
            torch.randn(n + 2, 5, generator=g),
            torch.stack([repeated(n + 2, n + 3, g)] * 2),
        ),
    ),
    "embedding_padding_backward": (
        lambda w, i: F.embedding(i, w, padding_idx=0),
        lambda n, g: (torch.randn(n + 2, 5, generator=g), repeated(n + 2, 2 * n + 3, g)),
    ),
    "max_pool2d_stem": (lambda x: F.max_pool2d(x, 3, 2, 1), pool_input),
    "max_pool2d_stride1": (lambda x: F.max_pool2d(x, 3, 1, 1), pool_input),
    "max_pool2d_ceil": (lambda x: F.max_pool2d(x, 2, 2, 0, ceil_mode=True), pool_input),
    "max_pool2d_dilation": (
        lambda x: F.max_pool2d(x, 2, 1, 1, dilation=2),
        lambda n, g: pool_input(n + 2, g),
    ),
    "max_pool1d": (lambda x: F.max_pool1d(x, 3, 2, 1), lambda n, g: pool_input(n, g, 1)),
    "adaptive_max_pool2d": (lambda x: F.adaptive_max_pool2d(x, 3), pool_input),
    "avg_pool2d_overlap": (lambda x: F.avg_pool2d(x, 3, 1, 1), pool_input),
    "max_pool3d": (lambda x: F.max_pool3d(x, 3, 2, 1), lambda n, g: pool_input(n, g, 3)),
    "adaptive_max_pool3d": (
        lambda x: F.adaptive_max_pool3d(x, 2),
        lambda n, g: pool_input(n, g, 3),
    ),
    # eager's avg_pool3d refuses an input smaller than the kernel, padding or not
    "avg_pool3d_overlap": (
        lambda x: F.avg_pool3d(x, 3, 1, 1),
        lambda n, g: pool_input(n + 2, g, 3),
    ),
    **{
        f"interpolate_{mode}": (
            lambda x, mode=mode: F.interpolate(x, scale_factor=2, mode=mode),
            pool_input,
        )
        for mode in ("nearest", "nearest-exact", "area")
    },
    **{
        f"interpolate_{mode}_{align}": (
            lambda x, mode=mode, align=align: F.interpolate(
                x, scale_factor=2, mode=mode, align_corners=align
            ),
            pool_input,
        )
        for mode in ("bilinear", "bicubic")
        for align in (True, False)
    },
    "interpolate_downsample_bilinear": (
        lambda x: F.interpolate(x, size=(3, 2), mode="bilinear"),
        pool_input,
    ),
    "interpolate_linear": (
        lambda x: F.interpolate(x, scale_factor=3, mode="linear"),
        lambda n, g: pool_input(n, g, 1),
    ),
    "interpolate_trilinear": (
        lambda x: F.interpolate(x, scale_factor=2, mode="trilinear"),
        lambda n, g: pool_input(n, g, 3),
    ),
    "cummax_backward": (
        lambda x: x.cummax(-1)[0],
        lambda n, g: (torch.randint(3, (4, n), generator=g).float(),),
    ),  # ties: one maximum repeats
    "cummin_backward": (
        lambda x: x.cummin(0)[0],
        lambda n, g: (torch.randint(3, (n, 4), generator=g).float(),),
    ),
    "sort_backward": (lambda x: x.sort(-1)[0], lambda n, g: (torch.randn(3, n, generator=g),)),
    "topk_backward": (
        lambda x: x.topk(min(3, x.shape[-1]), -1)[0],
        lambda n, g: (torch.randn(3, n, generator=g),),
    ),
    "kthvalue_backward": (
        lambda x: x.kthvalue(1, -1)[0],
        lambda n, g: (torch.randn(3, n, generator=g),),
    ),
    # overlapping 2x2 blocks summed into an (n + 1, n + 2) image; `like` carries that size
    "fold": (
        lambda x, like: F.fold(x, like.shape, 2),
        lambda n, g: (
            torch.randn(2, 3 * 4, n * (n + 1), generator=g),
            torch.zeros(n + 1, n + 2, dtype=torch.int8),
        ),
    ),
    "unfold_backward": (lambda x: F.unfold(x, 2, padding=1), pool_input),
    # Tensor.unfold's windows share elements (step < size): its backward adds them up, fused
    # with the producer's backward and the consumer's (issue 44)
    "tensor_unfold_backward": (
        lambda x: x.sin().unfold(1, 3, 1).cos(),
        lambda n, g: (torch.randn(4, n + 2, generator=g),),
    ),
    "tensor_unfold_step2": (
        lambda x: (x * 2).unfold(0, 3, 2).exp(),
        lambda n, g: (torch.randn(n + 3, 5, generator=g),),
    ),
    "tensor_unfold_output": (
        lambda x: F.layer_norm(x, (x.shape[-1],)).unfold(-1, 2, 1),
        lambda n, g: (torch.randn(3, n + 1, generator=g),),
    ),
    "as_strided_overlap": (
        lambda x: x.cos().as_strided((x.shape[0] - 2, 3), (1, 1)).exp(),
        lambda n, g: (torch.randn(n + 2, generator=g),),
    ),
    # repeated indices along the last dim: the SIMD loop's lanes would collide
    "index_put_accumulate_last_dim": (
        lambda x, i, v: torch.ops.aten.index_put(x, [None, i], v, True),
        lambda n, g: (
            torch.randn(4, n + 3, generator=g),
            repeated(n + 3, n + 1, g),
            torch.randn(4, n + 1, generator=g),
        ),
    ),
    "index_add_of_computed": (lambda x, i, v: x.sin().index_add(0, i, v.exp()), index_inputs),
    "scatter_add_of_computed": (
        lambda x, i, s: x.exp().scatter_add(1, i, s.sin()) * 2,
        scatter_inputs,
    ),
    "nll_loss_backward": (
        lambda x, t: F.cross_entropy(x, t, reduction="none"),
        lambda n, g: (torch.randn(n + 1, 5, generator=g), repeated(5, n + 1, g)),
    ),
}


def run(fn, inputs, weights):
    """fn's output and the gradients of sum(output * weight) w.r.t. its float inputs."""
    leaves = [t.detach().clone().requires_grad_(t.is_floating_point()) for t in inputs]
    out = fn(*leaves)
    grads = []
    if out.requires_grad:
        floats = [t for t in leaves if t.requires_grad]
        grads = torch.autograd.grad((out * weights).sum(), floats)
    return out.detach(), grads


@pytest.fixture
def threads():
    before = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("case", CASES)
def test_indexed_writes_match_eager(case, dynamic, warm_cache, threads):
    fn, make_inputs = CASES[case]
    compiled_fn = compiled(fn, dynamic)
    before = loaded_libraries()
    for n in SIZES:
        inputs = make_inputs(n, torch.Generator().manual_seed(n))
        shape = fn(*inputs).shape
        weights = torch.randn(shape, generator=torch.Generator().manual_seed(7))
        expected, expected_grads = run(fn, inputs, weights)
        got, got_grads = run(compiled_fn, inputs, weights)
        where = f"{case}, size {n}"
        torch.testing.assert_close(got, expected, msg=lambda m: f"{where}: {m}")
        assert len(got_grads) == len(expected_grads)
        for got_grad, grad in zip(got_grads, expected_grads):
            torch.testing.assert_close(got_grad, grad, msg=lambda m: f"{where}, grad: {m}")
    for key in loaded_libraries() - before:
        check_computed_stores(kernel_source(key), case)


# ---- the guard on generated C++ ----------------------------------------------------------

KERNEL = re.compile(r'extern "C" void (\w+)\(.*?\n\}', re.S)
COMPUTED = re.compile(r"const int64_t (t\d+) = dicp::(?:wrap|checked)_index")
# every pointer's stores: a scatter that accumulates into a buffer it also reads (the zeros
# of unfold's backward) writes through an `in_` pointer
STORE = re.compile(r"\b([a-z]\w*)\[([^\]]*)\] = ")
PARALLEL = re.compile(r"#pragma omp parallel for(?: collapse\((\d+)\))?")
SIMD_LOOP = re.compile(r"#pragma omp simd[^\n]*\n\s*for \(int64_t (\w+) = [^;]*; \w+ < ([^;]*);")
DEFINITION = re.compile(r"const \w+ (t\d+) = (.*);")
NAME = re.compile(r"\b[a-z]\w*\b")


def kernel_source(key):
    return (dicp_config.cache_dir / "kernels" / key[:2] / f"{key}.cpp").read_text()


def check_computed_stores(source, case):
    for kernel in KERNEL.finditer(source):
        text, name = kernel.group(0), kernel.group(1)
        computed = set(COMPUTED.findall(text))
        stores = [
            index
            for _, index in STORE.findall(text)
            if computed & set(re.findall(r"\bt\d+\b", index))
        ]
        if not stores:
            continue
        check_simd_lanes(text, name, case, computed)
        parallel = PARALLEL.search(text)
        if parallel:
            loops = [
                f"i{d}" for d in range(int(parallel.group(1) or 1)) if f"i{d} < 1L;" not in text
            ]  # a loop of one iteration never collides
            for index in stores:
                missing = [v for v in loops if not re.search(rf"\b{v}\b", index)]
                assert not missing, (
                    f"{case}: {name} runs loop(s) {missing} in parallel but "
                    f"its store [{index}] is not indexed by them:\n{text}"
                )


def check_simd_lanes(text, name, case, computed):
    """Each store through a computed index inside an `omp simd` loop over v (of more than one
    iteration) is indexed by v, through computed indices whose definitions never read v."""
    definitions = dict(DEFINITION.findall(text))
    for loop in SIMD_LOOP.finditer(text):
        var, extent = loop.groups()
        if extent.strip() == "1L":
            continue
        for index in [i for _, i in STORE.findall(_block(text, loop.end()))]:
            used = computed & set(re.findall(r"\bt\d+\b", index))
            if not used:
                continue
            assert re.search(rf"\b{var}\b", index), (
                f"{case}: {name} stores [{index}] under omp simd over {var}, not indexed by it"
            )
            for symbol in used:
                if _rows_of(index, var, extent, symbol) or _only_zero(symbol, definitions):
                    continue
                assert var not in _reads(symbol, definitions), (
                    f"{case}: {name} stores [{index}] under omp simd over {var}, and "
                    f"{symbol} varies with {var}:\n{text}"
                )


def _rows_of(index, var, extent, symbol):
    """Whether `index` is `var + extent * symbol + ...`, var (below `extent`) its only term in
    var: lanes stay within one row of `extent` columns whatever row `symbol` picks (an
    accumulating scatter along dim 0: cummin's backward, scatter_add(0, ...))."""
    terms = [t.strip("() ") for t in re.split(r" \+ (?![^(]*\))", index.strip()[1:-1])]
    extent = extent.strip()
    return (
        var in terms
        and {f"{extent} * {symbol}", f"{symbol} * {extent}"} & set(terms)
        and sum(bool(re.search(rf"\b{var}\b", t)) for t in terms) == 1
    )


def _only_zero(symbol, definitions):
    """Whether `symbol` is a computed index wrapped into a range of one value, 0 (the flat
    position within a max pool's 1x1 plane): it moves no lane."""
    return re.fullmatch(r"dicp::wrap_index<int64_t>\(t\d+, 1L\)", definitions.get(symbol, ""))


def _block(text, start):
    """The text of the braced block opening at or after `start`."""
    opening = text.index("{", start)
    depth = 0
    for position in range(opening, len(text)):
        depth += {"{": 1, "}": -1}.get(text[position], 0)
        if depth == 0:
            return text[opening:position]
    return text[opening:]


def _reads(symbol, definitions, seen=None):
    """The names `symbol`'s definition reads, through other definitions; a name without a
    `const` definition (a mutable local) reads everything, so it counts as every loop's."""
    seen = set() if seen is None else seen
    if symbol not in definitions:
        return {"i0", "i1", "i2", "i3", "i4", "i5", "i6", "i7", "r0", "r1", "r2", "r3"}
    names = set()
    for name in set(NAME.findall(definitions[symbol])) - seen:
        seen.add(name)
        names |= {name} | (
            _reads(name, definitions, seen) if re.fullmatch(r"t\d+", name) else set()
        )
    return names


# the issue's repros, at every input size from 1 to 32 (one dynamic graph each, so this costs
# runs, not builds); the repro scatter_add is the issue's own: 8 sources per row onto 3 targets
SWEPT = (
    "max_pool2d_stem",
    "max_pool2d_stride1",
    "max_pool2d_ceil",
    "max_pool2d_dilation",
    "max_pool1d",
    "interpolate_nearest",
    "interpolate_bilinear_True",
    "cummax_backward",
    "scatter_add",
)


@pytest.mark.parametrize("case", SWEPT)
def test_issue_repros_match_eager_at_sizes_1_to_32(case, warm_cache):
    fn, make_inputs = CASES[case]
    compiled_fn = compiled(fn, True)
    for n in range(1, 33):
        inputs = make_inputs(n, torch.Generator().manual_seed(n))
        weights = torch.randn(fn(*inputs).shape, generator=torch.Generator().manual_seed(7))
        expected, expected_grads = run(fn, inputs, weights)
        got, got_grads = run(compiled_fn, inputs, weights)
        torch.testing.assert_close(got, expected, msg=lambda m: f"{case}, size {n}: {m}")
        for got_grad, grad in zip(got_grads, expected_grads, strict=True):
            torch.testing.assert_close(got_grad, grad, msg=lambda m: f"{case}, size {n}, grad: {m}")


def test_overlapping_output_layout_is_written_by_one_thread(warm_cache):
    """(x * 2).unfold(0, 64, 1) returned in eager's layout, whose windows share elements:
    iterations of the outer loops of the kernel writing it store one element, so none runs
    in parallel (a collapse(2) loop did, above the parallel threshold)."""

    def fn(x):
        return (x * 2).unfold(0, 64, 1)

    x = torch.randn(600, 64, requires_grad=True)  # a training graph returns the view itself
    before = loaded_libraries()
    torch.testing.assert_close(compiled(fn)(x), fn(x))
    writing = [
        kernel.group(0)
        for key in loaded_libraries() - before
        for kernel in KERNEL.finditer(kernel_source(key))
        if "* static_cast<float>(2LL)" in kernel.group(0) and "in_primals_1" in kernel.group(0)
    ]  # the forward's, not the backward's
    assert len(writing) == 1 and "omp parallel" not in writing[0], writing

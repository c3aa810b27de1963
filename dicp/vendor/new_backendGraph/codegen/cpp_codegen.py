"""C++ target: lowers vendor ops to fused loop nests (loop IR), printed by the C++ renderer
into Jinja templates."""

from collections import Counter

import sympy
import torch
import torch.fx as fx

from dicp.api import (
    GeneratedGraph,
    GraphCodegenBase,
    Operator,
    log,
    shape_of,
    size_hints,
    sizes_as_sympy,
    storage_key,
    strides_of,
    to_sympy,
)

from .. import config

# imported for the rows they register in the lowering tables
from . import lowering_indexing, lowering_layout, lowering_pool, lowering_reduce  # noqa: F401
from .costs import divides_or_calls
from .cpp_render import CppRenderer
from .faults import KERNEL_FAULTS
from .horizontal import (
    MAX_BODIES,
    MAX_GROUPS,
    Emission,
    Group,
    PendingKernels,
    elementwise,
    loaded,
    one_body,
    same_buffers,
    shares,
    stored,
)
from .in_place import in_place_source, sources_read_where_stored
from .py_render import PyRenderer
from .values import Buffer, LazyReduction, Pointwise
from .kernel import KernelBuilder
from . import loop_ir as L
from .loop_ir import computed_ops, walk
from .loop_split import split_loops
from .loops import KernelLoops, PhaseLoops, loop_nest, on_one_thread, plan_loops
from .lowering import LOWERINGS
from ..convolution import channels_last_only
from .lowering_reduce import column_sums
from .native_entry import NATIVE_ENTRY_HEADER, NotNative, plan as plan_native_entry
from .sym import (
    contiguous_strides,
    is_static,
    loop_index,
    product,
    same_layout,
    size_extents,
    static_extents,
)
from .templates import render
from .transpose import transposed_dims, transposing_kernel
from .value_range import ValueRanges

PARALLEL_THRESHOLD = 32768  # elements of work below which OpenMP costs more than it saves
# Matrix operands (argument positions) of the library's products, which read any layout whose
# matrices are row-major or transposed.
GEMM_OPERANDS = {"Mm": (0, 1), "Bmm": (0, 1), "Addmm": (1, 2), "Baddbmm": (1, 2)}


def _static_extents(inner, loop_vars):
    """Trip counts of inner loops whose bounds do not depend on other loops, or their bound
    when a Min gives one (for the parallel threshold: a reduction's work is outer size times
    reduction size)."""
    extents = []
    for lo, hi in inner:
        extent = sympy.sympify(hi - lo)
        if extent.free_symbols & set(loop_vars) and isinstance(extent, sympy.Min):
            bounds = [a for a in extent.args if not a.free_symbols & set(loop_vars)]
            extent = sympy.Min(*bounds) if bounds else extent
        if not extent.free_symbols & set(loop_vars):
            extents.append(extent)
    return extents


def _reduction_uses(value):
    """For each read of a lazy reduction not yet realized in computing one element of `value`
    (at the loop variables `loop_index` names), the loop variables its index uses."""
    variables = loop_index(len(value.sizes))
    probe = KernelBuilder("probe", variables)
    probe.extents = static_extents(variables, value.sizes)
    probe.reduction_uses = []
    value.load(probe, variables)
    return probe.reduction_uses


def _with_kept_dims(flat, value):
    """Realized lazy reduction `value`'s buffer `flat` read with its kept size-1 dims too."""
    return Buffer(flat.base, value.dtype, list(value.sizes), contiguous_strides(value.sizes))


def _channels_last_strides(val):
    """The strides of `val` when it is a channels-last 4-d tensor (after a ConvolutionNHWC,
    eager's pointwise ops keep that layout), else None."""
    if (
        isinstance(val, torch.Tensor)
        and channels_last_only(val)
        and all(type(size) is int for size in val.shape)
    ):
        return list(val.stride())
    return None


def _channels_last_operands(node):
    """The arguments a library convolution that runs channels-last converts to channels-last
    itself (convolution.in_channels_last, and ATen's backward for its gradient): its input
    and weight, and a backward's gradient."""
    name = getattr(node.target, "name", None)
    if name == "ConvolutionNHWC" or (name == "FusedConvolution" and node.args[7]):
        return list(node.args[:2])
    if name == "ConvolutionBackwardNHWC":
        return list(node.args[:3])
    return []


def _matrix_operands(node):
    """The arguments `node` reads as matrices: its operands if it is a product, else none."""
    positions = GEMM_OPERANDS.get(getattr(node.target, "name", None), ())
    return [node.args[i] for i in positions]


def _matrices_transposed(buffer):
    """Whether `buffer` is dense with its last two dims swapped in memory (column-major
    matrices), a layout the products read without a copy."""
    sizes, strides = buffer.sizes, buffer.strides
    if len(sizes) < 2 or buffer.offset != 0:
        return False
    swapped = [*sizes[:-2], sizes[-1], sizes[-2]]
    expected = contiguous_strides(swapped)
    return list(strides) == [*expected[:-2], 1, expected[-2]]


def _strides_in_order(sizes, order):
    """Dense strides for `sizes` with dims laid out in `order`, outermost first."""
    inner = contiguous_strides([sizes[d] for d in order])
    return [inner[order.index(d)] for d in range(len(sizes))]


def _memory_order(strides):
    """The dims of a layout from its outermost in memory, when that is not their order."""
    order = (
        sorted(range(len(strides)), key=lambda d: -int(strides[d]))
        if all(isinstance(st, int) or getattr(st, "is_Integer", False) for st in strides)
        else None
    )
    return None if order is None or order == list(range(len(strides))) else order


def _loop_nest(k, outer, sizes):
    """The loops of kernel `k` as the loop plan reads them (loops.KernelLoops)."""
    extents, starts = dict(zip(outer, sizes)), {}
    phases = []
    for phase in k.phases:
        extents |= {v: hi - lo for v, lo, hi in phase.inner}
        starts |= {v: lo for v, lo, _ in phase.inner if lo != 0}
        pre, body, post = phase.accesses
        phases.append(PhaseLoops(tuple(v for v, _, _ in phase.inner), body, pre + post, phase.simd))
    return KernelLoops(outer, tuple(phases), extents, k.computed, starts, k.computed_symbols)


# Lazy values inlined into one another, at most: each is a nested expression the kernel
# builder walks recursively, and a chain of 400 adds (a sum over a list of tensors) passed
# Python's recursion limit; under bounds checks its kernel also took more arguments than
# ctypes can pass. A longer chain is written to memory every MAX_LAZY_DEPTH values.
MAX_LAZY_DEPTH = 64


def _fuses(user):
    return isinstance(user.target, Operator) and user.target.family != "library"


def _realized_with_siblings(node, value):
    """Whether column sum `value` stays lazy until its first reader needs it (then it is
    realized with every other column sum over the same rows computed by then: a batch norm
    backward's two sums), though read more than once: its readers are kernels, which realize
    it, and graph outputs (CppCodegen.materialize). A view of it reads it as a buffer."""
    return value.column_sum is not None and all(
        user.op == "output" or getattr(user.target, "family", None) in POINTWISE_FAMILIES
        for user in node.users
    )


POINTWISE_FAMILIES = ("unary", "binary", "ternary")


# Statements a lazy value may take and still be recomputed by each of its consumers rather
# than written to memory once and read back. Loop-index arithmetic counts a quarter: a causal
# mask's six index statements on attention scores made them look costly (written to memory
# for softmax to read back twice), while a long index computation still counts.
RECOMPUTE_LIMIT = 8
INDEX_STATEMENTS_PER_STATEMENT = 4


def _emit_probe(value):
    """A scratch kernel holding the statements of one element of `value`."""
    probe = KernelBuilder("probe", loop_index(len(value.sizes)))
    value.load(probe, loop_index(len(value.sizes)))
    return probe


def _cheap(value):
    """Whether `value` costs at most RECOMPUTE_LIMIT statements, index arithmetic weighed
    lighter."""
    probe = _emit_probe(value)
    statements = sum(1 for _ in walk(probe.statements()))
    index = probe.index_statements
    return statements - index + index // INDEX_STATEMENTS_PER_STATEMENT <= RECOMPUTE_LIMIT


def _computes_reductions(node, value):
    """Whether each element of lazy `value` computes lazy reductions of its own and two or
    more readers read it element for element (a batch norm's variance over an NCHW batch, one
    per channel, read by the scale that normalizes and by the running variance's update):
    inlined, each of those kernels computed them again, a pass over the batch each. Readers
    that broadcast it (a norm's rows) compute it as a phase of their one kernel."""
    own = _static_numel(node.meta.get("val"))
    readers = [_static_numel(u.meta.get("val")) for u in node.users]
    if own is None or own <= 1 or readers.count(own) < 2:
        return False
    probe = _emit_probe(value)
    return any(
        sympy.expand(product(r.kept_sizes()) - own) == 0
        for r in [*probe.fused_reductions, *probe.unfused]
    )


# A lazy value dividing or calling a function (costs.py: divisions, roots and the runtime's
# functions) on few elements that a much larger loop reads (batch norm's
# rsqrt(var + eps), one per channel, read at every pixel) is written to memory first, as
# eager's batch norm computes its per-channel scale once: conv_bn_relu's 64-channel batch norm
# over 1M elements took 170 us with a square root and a division per element, 80 us reading
# them. Only where the reader has at least BROADCAST_WRITE_MIN elements and
# BROADCAST_WRITE_RATIO times the value's: the value's own kernel call costs a few us.
BROADCAST_WRITE_MIN = 32768
BROADCAST_WRITE_RATIO = 16


def _frees_inputs(node, env):
    """Whether writing `node`'s value once lets two or more buffers of its size die here: it is
    their only reader (a residual branch's two gradients summed). Inlined into each of its
    consumers instead, or into one that makes a larger result (a max-pool backward), it would
    keep them all alive until the last kernel reading it (a ResNet's training step on emu
    peaked 4% above eager's, the sums held to the max-pool backward)."""
    own = _static_numel(node.meta.get("val"))
    dying = [arg for arg in _sole_reads(node, env) if _static_numel(arg.meta.get("val")) == own]
    return own is not None and own > 1 and len(dying) >= 2


def _one_reader_of_its_size(node):
    """Whether `node` has one reader, with no more elements than it has: inlined there, the
    buffers it reads die when that kernel ends, before anything larger is allocated."""
    if len(node.users) != 1:
        return False
    reader = _static_numel(next(iter(node.users)).meta.get("val"))
    own = _static_numel(node.meta.get("val"))
    return reader is not None and own is not None and reader <= own


def _sole_reads(node, env):
    """The buffers (not graph inputs) `node`'s lazy value is the last reader of, through the
    lazy values it inlines that nothing else reads: their other readers are computed already,
    in kernels (not lazy values still to be inlined somewhere)."""
    for arg in node.all_input_nodes:
        value = env.get(arg)
        if isinstance(value, Buffer) and arg.op != "placeholder" and _read_before(arg, node, env):
            yield arg
        elif type(value) is Pointwise and len(arg.users) == 1:
            yield from _sole_reads(arg, env)


def _read_before(arg, node, env):
    """Whether every reader of `arg` but `node` has been read: computed into a buffer, or
    inlined into values that all have (a reduction's pointwise operand)."""
    return all(user is node or _computed(user, env) for user in arg.users)


def _computed(node, env):
    if node not in env:
        return False
    value = env[node]
    if isinstance(value, LazyReduction):
        return value.realized is not None
    if isinstance(value, Pointwise):
        return all(_computed(user, env) for user in node.users)
    return True


def _costly_and_read_broadly(node, value):
    """Whether lazy `value` (of `node`) has a costly op, reads no reduction, and a reader of
    many times its elements (see BROADCAST_WRITE_MIN)."""
    if isinstance(value, LazyReduction):
        return False
    own = _static_numel(node.meta.get("val"))
    readers = [_static_numel(u.meta.get("val")) for u in node.users]
    if (
        own is None
        or None in readers
        or not readers
        or max(readers) < max(BROADCAST_WRITE_MIN, own * BROADCAST_WRITE_RATIO)
    ):
        return False
    probe = _emit_probe(value)
    reads_reduction = probe.phases or probe.unfused or probe.fused_reductions
    return not reads_reduction and divides_or_calls(computed_ops(probe.statements()))


def _static_numel(val):
    if not isinstance(val, torch.Tensor):
        return None
    numel = val.numel()
    return numel if isinstance(numel, int) else None


# Ops whose lazy result reads its input through div/mod index arithmetic, repeating the
# input's own index once per dim. A chain of them grows the index exponentially (Swin's window
# partition and reverse under dynamic shapes: 800 KB of C++ for one block, 27 MB and an 11 GB
# g++ for the model), so an input read through an index longer than INDEX_TEXT_LIMIT
# characters is written to memory first, where the view needs no arithmetic at all.
INDEX_ARITHMETIC_OPS = {"Reshape", "AsStrided"}
INDEX_TEXT_LIMIT = 2000


def _index_too_long(value):
    """Whether a line of C++ computing an element of `value` is over INDEX_TEXT_LIMIT."""
    if not isinstance(value, Pointwise):
        return False
    lines = CppRenderer().lines(_emit_probe(value).statements())
    return max(map(len, lines), default=0) > INDEX_TEXT_LIMIT


# A graph's kernels go into sources of at most this many kernels, which compile_job builds at
# once, one compiler per CPU: ResNet-50's backward (about 480 kernels) took most of its cold
# compile as one source. Fixed, not per machine: the sources are the cache key.
KERNELS_PER_SOURCE = 64


def _copy_targets(gm) -> set:
    """The graph inputs a CopyInto writes (an optimizer's parameters and state), whose storage
    no other input shares when traced: a kernel may compute the copied value into one
    directly (WrapperBuilder.offer_copy_elision). The copy's lowering drops its target."""
    inputs = [
        n
        for n in gm.graph.find_nodes(op="placeholder")
        if isinstance(n.meta.get("val"), torch.Tensor)
    ]
    written = {
        n.args[0]
        for n in gm.graph.nodes
        if n.op == "call_function" and getattr(n.target, "name", None) == "CopyInto"
    }
    storage = {n: storage_key(n.meta["val"]) for n in inputs}
    sharing = Counter(storage.values())
    return {n.name for n in inputs if n in written and sharing[storage[n]] == 1}


def _pointwise_phase(body):
    """The one phase of a pointwise kernel (CppCodegen.phased_kernel's form)."""
    return dict(pre=None, inner=(), body=None, post=body, simd=None)


def kernel_sources(kernels):
    """(file name, kernels) of each source: kernels.cpp, kernels_1.cpp, ..."""
    chunks = [
        kernels[i : i + KERNELS_PER_SOURCE] for i in range(0, len(kernels), KERNELS_PER_SOURCE)
    ]
    return [
        ("kernels.cpp" if i == 0 else f"kernels_{i}.cpp", chunk) for i, chunk in enumerate(chunks)
    ]


class UnsupportedLowering(NotImplementedError):
    pass


class CppCodegen(GraphCodegenBase):
    target = "cpp"

    def __init__(self, gm, ctx):
        super().__init__(gm, ctx)
        self.kernels, self.signatures = [], {}
        self.dividing_kernels = []  # kernels that may divide an integer by zero
        self.kernel_types = {}  # kernel -> its pointer Params
        self.small_kernels = {}  # kernel -> its work, where its loop runs on one thread
        self.input_dtypes = {}  # wrapper variable holding an input or constant -> its dtype
        self.size_params, self.defined_size_params = {}, set()  # see KernelBuilder._hoist
        self.bounds_check = config.bounds_check()
        self.lazy_reductions = False  # whether any value so far is a LazyReduction
        self._lazy_depths = {}  # node -> how many lazy values its value nests (_lazy_depth)
        self._matrices_read = []  # nodes the library call being emitted reads as matrices
        self._channels_last_reads = []  # nodes it converts to channels-last (see above)
        self._value_ranges = None
        self.copy_targets = _copy_targets(gm)
        self._pending = PendingKernels()  # pointwise kernels held back (horizontal.py)
        self._lazy = {}  # nodes whose value was lazy when computed, in graph order
        self.wrapper.before_statement = self.flush_kernels

    # ---- values ----
    def input_value(self, node, val, name=None):
        name = name or node.name
        sizes, strides = shape_of(val), strides_of(val)
        self.wrapper.layouts[name] = (sizes, strides)
        self.input_dtypes[name] = val.dtype
        return Buffer(name, val.dtype, sizes, strides, 0)

    def value_range(self, arg):
        """Bounds on the values of node or number `arg` (value_range.py)."""
        if self._value_ranges is None:
            self._value_ranges = ValueRanges(self.gm.graph)
        return self._value_ranges.of(arg)

    def vendor_op(self, node):
        if node.target.family == "library":
            self._matrices_read = _matrix_operands(node)
            self._channels_last_reads = _channels_last_operands(node)
            # a library op's result layout may follow its input's strides where the kernels'
            # do not tell layouts apart (a size-1 channel dim: a transposed convolution after
            # a one-channel group norm came back NCHW, traced channels-last: random_nets seed
            # 463); products' results do not, and the native entry plans their lines
            result = self.aten_call(
                node,
                self.vendor_op_source(node.target),
                node.target,
                as_traced=not self._matrices_read,
            )
            self._matrices_read = self._channels_last_reads = []
            val = node.meta.get("val")
            if (
                node.target.fresh_result
                and isinstance(result, Buffer)
                and to_sympy(val.storage_offset()) == 0
            ):
                self.wrapper.own_fresh_result(
                    result.base, val.dtype, result.sizes, result.strides, node.target.writes_out
                )
            elif node.target.fresh_result and isinstance(result, tuple):
                self.wrapper.keeps_no_views(self.last_call)
            return result
        try:
            lower = LOWERINGS[node.target.name]
        except KeyError:
            raise UnsupportedLowering(
                f"vendor op {node.target.name} has no C++ lowering; add one in codegen/lowering*.py"
            ) from None
        args, kwargs = fx.node.map_aggregate(
            fx.node.map_arg((node.args, node.kwargs), self._size_or_node), sizes_as_sympy
        )
        value = lower(self, node, *args, **kwargs)
        self.lazy_reductions |= isinstance(value, LazyReduction)
        if (
            node.target.name in INDEX_ARITHMETIC_OPS
            and _index_too_long(value)
            and isinstance(self.env[node.args[0]], Pointwise)
        ):
            self.env[node.args[0]] = self.realize(self.env[node.args[0]])
            value = lower(self, node, *args, **kwargs)
        if not self._must_realize(node, value):
            return value
        return self.realize(
            value,
            self._transposed_operand_strides(node, value)
            or _channels_last_strides(node.meta["val"]),
        )

    def _materialize_node(self, arg):
        """A product's matrix operand stays in memory with its matrices transposed (see
        _transposed_operand_strides); any other argument takes its traced layout."""
        value = self.env[arg]
        if arg in self._matrices_read and isinstance(value, Buffer) and _matrices_transposed(value):
            return value
        if arg in self._channels_last_reads:
            return self._in_channels_last(value)
        return super()._materialize_node(arg)

    def _in_channels_last(self, value):
        """4-d `value` in memory channels-last, written by a kernel of ours where it is not:
        the library convolution converts its operands with ATen's strided copy otherwise
        (a 1x1 convolution's backward converting an 8x64x32x32 NCHW gradient: 0.85 ms), and
        each weight at every call, with a call's overhead."""
        if not isinstance(value, (Buffer, Pointwise)) or len(value.sizes) != 4:
            return value
        strides = _strides_in_order(value.sizes, [0, 2, 3, 1])
        if isinstance(value, Buffer) and same_layout(value.sizes, value.strides, strides):
            return value
        return self.realize(Pointwise(value.dtype, value.sizes, value.load), strides)

    def _transposed_operand_strides(self, node, value):
        """Strides for `value` read only as a matrix operand of products, when its source runs
        along the other matrix dim (a head-split key, transposed for attention's scores):
        its matrices transposed in memory, so the kernel writing it copies straight instead of
        transposing tiles (llama_block's key: 43 -> 17 us). The products read either layout
        alike. None for any other value."""
        val = node.meta.get("val")
        if (
            not node.users
            or not isinstance(val, torch.Tensor)
            or val.dim() < 2
            or isinstance(value, LazyReduction)
            or not all(node in _matrix_operands(u) for u in node.users)
        ):
            return None
        rows, columns = val.dim() - 2, val.dim() - 1
        if transposed_dims(value, contiguous_strides(value.sizes)) != (rows, columns):
            return None
        strides = contiguous_strides([*value.sizes[:rows], value.sizes[columns], value.sizes[rows]])
        return [*strides[:rows], 1, strides[rows]]

    def _lazy_depth(self, node):
        """How many lazy values `node`'s value nests, itself included (MAX_LAZY_DEPTH)."""
        inlined = [
            self._lazy_depths.get(arg, 1)
            for arg in node.all_input_nodes
            if type(self.env.get(arg)) is Pointwise
        ]
        depth = self._lazy_depths[node] = 1 + max(inlined, default=0)
        return depth

    def _size_or_node(self, arg):
        """Size arithmetic nodes become their sympy expression; tensors stay nodes."""
        value = self.env[arg]
        return value if isinstance(value, sympy.Basic) else arg

    def _must_realize(self, node, value):
        """Inline a lazy value into consumers that fuse: its only one, or each of several when
        it is cheap to recompute (softmax's exp(x - max) feeds the sum and the division).
        Otherwise write it once."""
        if not isinstance(value, Pointwise):
            return False
        if isinstance(value, LazyReduction):
            if _realized_with_siblings(node, value):
                return False
            return len(node.users) != 1 or not _fuses(next(iter(node.users)))
        if self._lazy_depth(node) > MAX_LAZY_DEPTH:
            return True
        if _costly_and_read_broadly(node, value):
            return True
        if not all(_fuses(u) for u in node.users if u.op != "output"):
            return True
        if not _one_reader_of_its_size(node) and _frees_inputs(node, self.env):
            return True
        if len(node.users) == 1:
            return False
        return (
            any(u.op == "output" for u in node.users)
            or not _cheap(value)
            or _computes_reductions(node, value)
        )

    def call_function(self, node):
        value = super().call_function(node)
        if isinstance(value, Pointwise):
            self._lazy[node] = None
        return value

    def realize_live_values(self):
        """Before a kernel overwrites a buffer, compute every lazy value still to be read.
        The lazy nodes are tracked (`_lazy`, in graph order): an optimizer's graph copies
        into each of thousands of inputs, and scanning every node at each copy was most of
        the compile of a 400-parameter AdamW step."""
        for node in list(self._lazy):
            del self._lazy[node]  # realized now, or read by no node still to come
            value = self.env[node]
            if isinstance(value, Pointwise) and any(u not in self.env for u in node.users):
                self.env[node] = self.realize(value)

    def materialize(self, value, val=None):
        if isinstance(value, (list, tuple)):
            vals = val if isinstance(val, (list, tuple)) else [None] * len(value)
            return type(value)(self.materialize(v, f) for v, f in zip(value, vals))
        if not isinstance(val, torch.Tensor) or not isinstance(value, (Buffer, Pointwise)):
            return value
        if isinstance(value, LazyReduction) and value.column_sum is not None:
            value = self.realize(value)  # its own kernel, then a copy only if laid out otherwise
        strides = strides_of(val)
        if isinstance(value, Buffer) and (
            val.numel() <= 1 or same_layout(value.sizes, value.strides, strides)
        ):
            return value
        return self.realize(Pointwise(value.dtype, value.sizes, value.load), strides)

    # ---- kernels ----
    def realize(self, value, strides=None):
        if isinstance(value, Buffer):
            return value
        if isinstance(value, LazyReduction) and strides is None:
            return self._realize_reduction(value)
        strides = strides or contiguous_strides(value.sizes)
        base = self.wrapper.allocate(value.dtype, value.sizes, strides)
        out = Buffer(base, value.dtype, list(value.sizes), list(strides))
        split = self._outer_rank(value)
        order = _memory_order(strides)
        transposed = transposed_dims(value, strides) if split is None else None
        if transposed is not None:
            transposing_kernel(self, value, out, *transposed)
        elif split is None and order is not None:
            self._kernel_in_memory_order(value, out, order)
        elif split in (None, 0, len(value.sizes)):
            self.pointwise_kernel(
                value.sizes,
                lambda k, index: out.store(k, index, value.load(k, index)),
                split=True,
            )
        else:
            self.kernel(
                value.sizes[:split],
                pre=None,
                inner=[(0, size) for size in value.sizes[split:]],
                body=lambda k, outer, inner: out.store(
                    k, outer + inner, value.load(k, outer + inner)
                ),
                post=None,
                simd_reduction="",
            )
        return out

    def _kernel_in_memory_order(self, value, out, order):
        """A pointwise kernel whose loops run in the order of `out`'s memory (`order`: dims
        from outermost), so its innermost loop stores contiguously (channels-last: over
        channels)."""

        def store(k, index):
            out.store(k, index, value.load(k, index))

        self.pointwise_kernel_in_order(value.sizes, store, order, split=True)

    def pointwise_kernel_in_order(self, sizes, body, order, split=False):
        """pointwise_kernel with its loops over the dims of `sizes` in `order` (outermost
        first); `body` still gets the index in the dims' own order."""

        def in_order(k, loop_index):
            body(k, [loop_index[order.index(d)] for d in range(len(order))])

        self.pointwise_kernel([sizes[d] for d in order], in_order, split=split)

    def _realize_reduction(self, value):
        """A lazy reduction in a buffer of its own, one kernel over its kept dims (a column
        sum: one kernel for it and the other column sums over the same rows)."""
        if value.realized is not None:
            return value.realized
        if value.column_sum is not None:
            self._realize_column_sums(value)
            return value.realized
        flat = self._reduction_buffer(value)
        self.pointwise_kernel(
            flat.sizes, lambda k, index: flat.store(k, index, k.fused_reduction(value, index))
        )
        value.realized = _with_kept_dims(flat, value)
        return value.realized

    def _reduction_buffer(self, value):
        """A buffer for `value` as its kept dims only (what its kernel stores)."""
        value.computed_in_kernel = False  # its own kernel computes it in any case
        kept = value.kept_sizes()
        base = self.wrapper.allocate(value.dtype, value.sizes, contiguous_strides(value.sizes))
        return Buffer(base, value.dtype, kept, contiguous_strides(kept))

    def _realize_column_sums(self, value):
        """Column sum `value` and every other one not computed yet over the same rows (whose
        inputs are all computed by now: a batch norm backward's two sums) in one kernel. Only
        sums of values that read no lazy reduction join: computing one inside the group's
        kernel could need a member of the group (a variance reads its mean)."""
        group = {id(value): value}
        if not _reduction_uses(value.column_sum.x):
            key = value.column_sum.rows_key()
            for other in self.env.values():
                if (
                    isinstance(other, LazyReduction)
                    and other.column_sum is not None
                    and other.realized is None
                    and other.column_sum.rows_key() == key
                    and not _reduction_uses(other.column_sum.x)
                ):
                    group.setdefault(id(other), other)
        buffers = [self._reduction_buffer(v) for v in group.values()]
        column_sums(self, [(v.column_sum, b) for v, b in zip(group.values(), buffers)])
        for v, flat in zip(group.values(), buffers):
            v.realized = _with_kept_dims(flat, v)

    def copy_to_walk(self, copies):
        """Copy the buffer of each (read, dim) of `copies` (transpose.copies_to_walk) into
        its own dim order with `dim` innermost, by tiles, and have every kernel from here on
        read the copy (Buffer.read_from); whether every one could be (static sizes). The
        buffer objects are marked: another value later written into the same memory is
        another object."""
        buffers = [self._buffer_of(read) for read, _ in copies]
        if any(b is None or not all(is_static(size) for size in b.sizes) for b in buffers):
            return False
        for buffer, (_, dim) in zip(buffers, copies):
            if buffer.read_from is None:
                order = [d for d in range(len(buffer.sizes)) if d != dim] + [dim]
                copy = Pointwise(buffer.dtype, buffer.sizes, buffer.load)
                buffer.read_from = self.realize(copy, _strides_in_order(buffer.sizes, order))
        return True

    def _buffer_of(self, read):
        """The buffer of the graph's values that kernel access `read` reads, or None."""
        return next(
            (
                value
                for value in self.env.values()
                if isinstance(value, Buffer)
                and (value.base, tuple(value.strides), value.offset)
                == (read.base, read.strides, read.offset)
            ),
            None,
        )

    def _outer_rank(self, value):
        """How many leading dims of `value` the kernel computing it loops over outside, so
        that the lazy reductions it reads are computed once per outer iteration (in the
        kernel: see KernelBuilder.fused_reduction): up to the last dim their indices use.
        None when it reads none, or when none of them could be computed there: a reduction
        is computed in a kernel only at an index using every outer loop (a batch norm's
        channel statistics, read at [n, c] loops, are not), and such a split would only keep
        the kernel from looping in its output's memory order (channels-last: 0.17 ms for
        ReLU(BN(x)) of a 16x16x32x32 x looped over [n, c] outside, against 0.02)."""
        if not self.lazy_reductions:
            return None
        uses = _reduction_uses(value)
        if not uses:
            return None
        variables = loop_index(len(value.sizes))
        used = set().union(*uses)
        leading_units = next(
            (d for d, size in enumerate(value.sizes) if size != 1), len(value.sizes)
        )
        split = max([d + 1 for d, v in enumerate(variables) if v in used] + [leading_units])
        varying = {v for v, size in zip(variables[:split], value.sizes) if size != 1}
        if not any(varying <= use for use in uses):
            return None
        return split

    def pointwise_kernel(self, sizes, body, fuse=True, split=False):
        """A kernel computing `body(k, index)` at each index of `sizes`, run with the pointwise
        kernels before and after it over the same loops where they share memory (horizontal.py);
        `split`: its loops split or merged where its accesses allow (loop_split.py), the
        group's together; `fuse=False`: a kernel of its own, emitted now."""
        if fuse and self._grouped(tuple(sizes), body, split):
            return
        if split:
            sizes, body = split_loops(sizes, body)
        self.kernel(sizes, pre=None, inner=(), body=None, post=body)

    def _grouped(self, sizes, body, split):
        """Whether pointwise `body` over `sizes` joined a group of kernels held back, or
        started one."""
        alone = self._pointwise_emission(sizes, [body], split)
        if not elementwise(alone.kernel):
            return False
        reads, writes = loaded(alone.kernel), stored(alone.kernel)
        pending = self._pending
        conflicts = pending.conflicts(reads, writes)
        for group in pending.over(sizes, split):
            if (
                len(group.bodies) < MAX_BODIES
                and (group.reads | group.writes) & (reads | writes)
                and shares(group.emission.kernel, alone.kernel)
                and pending.may_join(group, conflicts)
            ):
                merged = self._pointwise_emission(sizes, [*group.bodies, body], split)
                if elementwise(merged.kernel) and same_buffers(
                    merged.body_buffers, [*group.emission.body_buffers, *alone.body_buffers]
                ):
                    pending.join(group, merged, body, reads, writes, conflicts)
                    return True
        if len(pending) >= MAX_GROUPS:
            self.flush_kernels()
            conflicts = set()
        group = Group(sizes, split, [body], alone, self.wrapper.lowering, reads, writes)
        pending.start(group, conflicts)
        return True

    def _pointwise_emission(self, sizes, bodies, split):
        """`bodies` emitted as one pointwise kernel (horizontal.Emission)."""
        body = one_body(bodies)
        if split:
            sizes, body = split_loops(sizes, body)
        return Emission(self._emit_kernel(sizes, [_pointwise_phase(body)]), list(sizes))

    def flush_kernels(self, before=None):
        """Emit the groups of pointwise kernels held back, each as one kernel (named in
        profiles after the op that started it): all of them, or those kernel `before` (a
        KernelBuilder about to be added) must run after."""
        if before is None:
            groups = self._pending.take()
        else:
            params = before.params.values()
            groups = self._pending.take(
                {p.base for p in params}, {p.base for p in params if p.writable}
            )
        lowering = self.wrapper.lowering
        try:
            for group in groups:
                self.wrapper.lowering = group.origin
                self._add_kernel(group.emission.kernel, group.emission.sizes)
        finally:
            self.wrapper.lowering = lowering

    def kernel(self, sizes, pre, inner, body, post, simd_reduction=None):
        """Emit one loop nest: outer loops over `sizes`, then `pre`, the `inner` loops with
        `body`, then `post`. Callbacks get (kernel, outer index[, inner index]). Lazy
        reductions the callbacks read at an index of the outer loops become phases of this
        nest, computed before (see KernelBuilder.fused_reduction); any other is realized
        first. Which loops run in parallel or as SIMD is decided from the accesses (loops.py)."""
        self.phased_kernel(
            sizes, [dict(pre=pre, inner=inner, body=body, post=post, simd=simd_reduction)]
        )

    def phased_kernel(self, sizes, phases):
        """`kernel` with several phases run in order in each outer iteration, each a dict of
        its `kernel` arguments (simd: `simd_reduction`)."""
        k = self._emit_kernel(sizes, phases)
        while k.unfused:
            for reduction in k.unfused:
                self.realize(reduction)
            k = self._emit_kernel(sizes, phases)
        row_caches = k.plan_row_caches()
        if row_caches:
            cached = self._emit_kernel(sizes, phases, row_caches)
            k = cached if cached.row_caches_hold() else k
        self.flush_kernels(before=k)
        self._add_kernel(k, sizes)

    def _emit_kernel(self, sizes, phases, row_caches=None):
        outer = loop_index(len(sizes))
        k = KernelBuilder(
            f"kernel_{len(self.kernels)}", outer, self.bounds_check, self.size_params, row_caches
        )
        k.unit_loops = {v for v, size in zip(outer, sizes) if size == 1}
        k.extents = static_extents(outer, sizes)
        k.size_extents = size_extents(outer, sizes)
        for phase in phases:
            pre, body, post = phase["pre"], phase["body"], phase["post"]
            k.phase(
                phase["inner"],
                pre=pre and (lambda k, pre=pre: pre(k, outer)),
                body=body and (lambda k, inner, body=body: body(k, outer, inner)),
                post=post and (lambda k, inner, post=post: post(k, outer)),
                simd=phase["simd"],
            )
        return k

    def _add_kernel(self, k, sizes):
        k.name = f"kernel_{len(self.kernels)}"  # kernels held back may have gone first
        for reduction in k.fused_reductions:
            reduction.computed_in_kernel = True
        outer = loop_index(len(sizes))
        nest = _loop_nest(k, outer, sizes)
        plan = plan_loops(nest)
        work = k.index(
            product(sizes)
            * sum(
                product(_static_extents([(lo, hi) for _, lo, hi in p.inner], list(nest.extents)))
                for p in k.phases
            )
        )
        loops = [(v, k.index(s)) for v, s in zip(outer, sizes)]
        shared = in_place_source(k, self.wrapper.may_share) or ()
        # the output may be written into an input it reads (a copy elided into it): no restrict
        into_target = (
            list(sources_read_where_stored(k, lambda _, source: source in self.copy_targets))
            if self.copy_targets
            else []
        )
        unrestricted = [*shared, *(p for pair in into_target for p in pair)]
        params, symbols = k.params_of(self.wrapper.private, unrestricted)
        kernel = L.Kernel(
            k.name,
            tuple(params),
            tuple(s.name for s in symbols),
            self.bounds_check,
            loop_nest(k, loops, plan, work, PARALLEL_THRESHOLD),
        )
        self.kernels.append(self._render(kernel))
        extents = 2 * len(params) if self.bounds_check else 0
        self.signatures[k.name] = (len(params), len(symbols) + extents)
        self.kernel_types[k.name] = list(params)
        if on_one_thread(work, PARALLEL_THRESHOLD):
            self.small_kernels[k.name] = int(work.expr)
        self.define_size_params(symbols)
        self.wrapper.call_kernel(k.name, [p.base for p in params], symbols, self.bounds_check)
        if shared:
            self.wrapper.offer_in_place(*(p.base for p in shared))
        for output, source in into_target:
            self.wrapper.note_read_where_stored(output.base, source.base)

    def _render(self, kernel):
        """The kernel's C++ (cpp_render.py)."""
        printer = CppRenderer(self.bounds_check)
        source = printer.kernel(kernel)
        if printer.divides_integers:
            self.dividing_kernels.append(kernel.name)
        return source

    def define_size_params(self, symbols):
        """Wrapper lines computing the hoisted size parameters a kernel call passes."""
        expressions = {symbol: expr for expr, symbol in self.size_params.items()}
        for symbol in symbols:
            if symbol in expressions and symbol not in self.defined_size_params:
                self.wrapper.set_size(symbol, expressions[symbol])
                self.defined_size_params.add(symbol)

    def finish(self):
        self.flush_kernels()
        statements, sources = self.wrapper.planned(), kernel_sources(self.kernels)
        files = {
            name: render("module.cpp.j2", kernels=kernels, bounds_check=self.bounds_check)
            for name, kernels in sources
        }
        metadata = {"kernels": dict(self.signatures), "divide_integers": self.dividing_kernels}
        entry = self._native_entry(statements, sources)
        wrapper_source = self.wrapper.render(statements)
        if entry is not None:
            wrapper_source = self.wrapper.render(entry.statements, NATIVE_ENTRY_HEADER)
            files[sources[-1][0]] += "\n" + CppRenderer(self.bounds_check).entry(entry)
            metadata["entry"] = {
                "functions": entry.entries,
                "products": entry.products,
                "external": list(entry.external),
                "source": sources[-1][0],
            }
        return GeneratedGraph(
            self.ctx.graph_name,
            self.target,
            wrapper_source,
            files,
            dict(self.vendor_ops),
            self.wrapper.constants,
            metadata,
        )

    def _native_entry(self, statements, sources):
        """Native entries running the wrapper's kernels and products (native_entry.py), in
        the graph's last source, or None: switched off, no kernels, or no two steps in a row
        the entries can run."""
        if not config.native_entry() or not sources:
            return None
        first_local = KERNELS_PER_SOURCE * (len(sources) - 1)
        local = {f"kernel_{i}" for i in range(first_local, len(self.kernels))}
        try:
            return plan_native_entry(
                statements,
                self.wrapper.inputs,
                self.wrapper.layouts,
                {**self.input_dtypes, **self.wrapper.dtypes},
                self.kernel_types,
                local,
                size_hints(self.ctx.fake_mode),
                self.bounds_check,
                self.small_kernels,
                PARALLEL_THRESHOLD,
            )
        except NotNative as reason:
            log.debug("%s keeps a call per kernel: %s", self.ctx.graph_name, reason)
            return None
        except Exception:  # a planner bug must not cost the graph: the wrapper still runs
            log.warning(
                "%s: planning its native entry failed; it keeps a call per kernel "
                "(DICP_NATIVE_ENTRY=0 skips the planning)",
                self.ctx.graph_name,
                exc_info=True,
            )
            return None

    def inject_fault(self, node, value, kind):
        """Accuracy and compile faults go into the kernels' C++; the rest into the wrapper."""
        if kind not in KERNEL_FAULTS:
            return super().inject_fault(node, value, kind)
        return self.map_first_tensor(value, KERNEL_FAULTS[kind])

    def is_tensor_value(self, value):
        return isinstance(value, (Buffer, Pointwise))


class LoopPythonCodegen(CppCodegen):
    """The C++ target's lowering and schedule, each kernel printed by the Python renderer
    (py_render.py) instead: no compiler, slow; for checking a schedule or a renderer."""

    target = "python_loops"

    def _render(self, kernel):
        return PyRenderer().kernel(kernel)

    def finish(self):
        self.flush_kernels()
        source = PYTHON_KERNELS_HEADER + "\n\n".join(self.kernels)
        return GeneratedGraph(
            self.ctx.graph_name,
            self.target,
            self.wrapper.render(),
            {"kernels.py": source},
            dict(self.vendor_ops),
            self.wrapper.constants,
            {"kernels": dict(self.signatures)},
        )


PYTHON_KERNELS_HEADER = (
    "# Generated by dicp new_backendgraph (python_loops): loop IR kernels "
    "printed as Python.\n"
    "from dicp.vendor.new_backendGraph.codegen import py_runtime as rt\n\n"
    "DICP_SUM_CHUNK = 16  # a float sum's chunk: one vector lane's (dicp_runtime.h)\n\n\n"
)

"""Random programs, checked op by op against eager at every size configuration.

The generator keeps each value's eager tensors at every configuration. An op generator (the
catalog in ops_*.py) proposes an expression, maybe with new inputs; the generator evaluates it
at every configuration and keeps it only if eager accepts it and the result is well formed (no
empty or huge tensors, the same rank and 1-sized dims everywhere, no integer overflow). So
every parameter a catalog entry picks (an index, a slice bound, a reshape) is valid at every
size of a dynamic program by construction.
"""

import random
import re
from dataclasses import replace
import warnings

import torch

from . import ops_index, ops_nn, ops_pointwise, ops_shape
from .inputs import ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, Input
from .program import Op, Program, evaluate

CATALOG = {**ops_pointwise.CATALOG, **ops_shape.CATALOG, **ops_index.CATALOG, **ops_nn.CATALOG}
FAMILIES = tuple(sorted({family for family, _ in CATALOG.values()}))
MAX_NUMEL = 2**19
# Some programs draw half their dims from one large size, so that kernels get past the OpenMP
# threshold (32768 elements of work: two such dims) and run their parallel code.
LARGE_SHARE = 0.15
LARGE_SIZES = (181, 257)
INT_LIMIT = 2**24  # integer results beyond this risk overflow in later ops
DTYPE_WEIGHTS = {
    torch.float32: 10,
    torch.float16: 2,
    torch.bfloat16: 2,
    torch.float64: 2,
    torch.int64: 3,
    torch.int32: 2,
    torch.bool: 2,
}
RANK_WEIGHTS = (1, 3, 5, 4, 3)  # rank 0..4


class Generator:
    """Builds one program. Catalog entries call the helpers below."""

    def __init__(self, seed, configs, backward=True, sizes=None):
        self.rng = random.Random(seed)
        self.seed, self.configs, self.backward = seed, configs, backward
        self.inputs, self.ops, self.pending = [], [], []
        self._built = {}  # (pending input, configuration) -> tensor
        self.env = [{} for _ in range(configs)]  # per configuration: name -> eager tensor
        self.sizes = sizes or size_pool(self.rng, configs)

    # ---- sizes ----
    def random_size(self, one=0.2):
        if self.rng.random() < one:
            return (1,) * self.configs
        if min(self.sizes[-1]) >= LARGE_SIZES[0] and self.rng.random() < 0.5:
            return self.sizes[-1]
        return self.rng.choice(self.sizes)

    def random_dims(self, rank=None):
        rank = self.rng.choices(range(5), RANK_WEIGHTS)[0] if rank is None else rank
        return tuple(self.random_size() for _ in range(rank))

    # ---- values ----
    def names(self):
        return [i.name for i in self.inputs] + [op.out for op in self.ops]

    def tensor(self, name, config=0):
        return self.env[config][name] if name in self.env[config] else self._pending(name, config)

    def _pending(self, name, config):
        if (name, config) not in self._built:
            spec = next(i for i in self.pending if i.name == name)
            self._built[name, config] = spec.build(config).detach()
        return self._built[name, config]

    def dims(self, name):
        shapes = [self.tensor(name, c).shape for c in range(self.configs)]
        return tuple(tuple(s[d] for s in shapes) for d in range(len(shapes[0])))

    def dtype(self, name):
        return self.tensor(name).dtype

    def rank(self, name):
        return self.tensor(name).dim()

    def min_size(self, name, dim):
        return min(self.dims(name)[dim])

    def pick(self, where=lambda name: True, recent=0.6):
        """A value or input satisfying `where`, preferring the latest op's result."""
        names = [n for n in self.names() if where(n)]
        if not names:
            return None
        if self.ops and self.ops[-1].out in names and self.rng.random() < recent:
            return self.ops[-1].out
        return self.rng.choice(names)

    def size_expr(self, size):
        """Python text of a runtime size equal to `size` (a per-configuration tuple) at every
        configuration: a dim of an input or value, else a literal if it never changes."""
        for name in self.names():
            for d, dim in enumerate(self.dims(name)):
                if dim == size:
                    return f"{name}.shape[{d}]"
        return str(size[0]) if len(set(size)) == 1 else None

    # ---- new inputs ----
    def random_dtype(self, among=ALL_DTYPES):
        among = list(among)
        return self.rng.choices(among, [DTYPE_WEIGHTS[d] for d in among])[0]

    def new_input(self, dims, dtype=None, kind=None, args=(), layout=None, grad=None):
        dtype = dtype or self.random_dtype()
        if kind is None:
            kind = "float" if dtype.is_floating_point else "bool" if dtype == torch.bool else "int"
            if kind == "float" and self.rng.random() < 0.08:
                kind = "special"
            args = (-4, 5) if kind == "int" else args
        if layout is None:
            layout = self.random_layout(dims) if kind != "perm" else ()
        if grad is None:
            grad = self.backward and dtype.is_floating_point and self.rng.random() < 0.8
        if any(_numel(dims, c) > MAX_NUMEL for c in range(self.configs)):
            raise ValueError("input too large")  # the proposal is dropped (see try_op)
        prefix = "x" if kind in ("float", "special") else "i"
        name = f"{prefix}{len(self.inputs) + len(self.pending)}"
        seed = self.seed * 1009 + len(self.inputs) + len(self.pending)
        self.pending.append(Input(name, tuple(dims), dtype, kind, seed, args, layout, grad))
        return name

    def index_input(self, dims, low, high, dtype=torch.int64):
        return self.new_input(dims, dtype, "int", (low, high))

    def random_layout(self, dims):
        rank, roll = len(dims), self.rng.random()
        if rank >= 2 and roll < 0.2:
            order = list(range(rank))
            while order == sorted(order):
                self.rng.shuffle(order)
            return ("permute", tuple(order))
        if rank >= 1 and roll < 0.35:
            return (
                "slice",
                self.rng.randrange(rank),
                self.rng.choice((2, 3)),
                self.rng.choice((0, 1)),
            )
        wide = [d for d in range(rank) if min(dims[d]) > 1]
        if wide and roll < 0.42:
            return ("expand", self.rng.choice(wide))
        return ()

    # ---- ops ----
    def try_op(self, propose, family):
        """Evaluate the expression `propose(self)` returns at every configuration; keep it
        (with its new inputs) if eager accepts it and its result is well formed."""
        self.pending, self._built = [], {}
        try:
            expr = propose(self)
        except (IndexError, ValueError):
            expr = None
        if expr is None:
            return False
        results = self._evaluate_everywhere(expr)
        if results is None or not self._consistent():
            return False
        name = f"v{len(self.ops)}"
        uses = tuple(n for n in self.names() + [i.name for i in self.pending] if _mentions(expr, n))
        if not all(
            converts_safely(expr, [self.tensor(u, c) for u in uses]) for c in range(self.configs)
        ):
            return False
        self.inputs += self.pending
        for config, result in enumerate(results):
            self._add_inputs(config)
            self.env[config][name] = result
        self.ops.append(Op(name, expr, uses, family))
        self.pending = []
        return True

    def _consistent(self):
        if self.configs == 1:
            return True
        return consistent_sizes(
            [
                [self.tensor(i.name, c) for i in self.inputs + self.pending]
                for c in range(self.configs)
            ]
        )

    def _add_inputs(self, config):
        for i in self.inputs:
            if i.name not in self.env[config]:
                self.env[config][i.name] = i.build(config).detach()

    def _evaluate_everywhere(self, expr):
        if not self._small_enough(expr):
            return None
        results = []
        for config in range(self.configs):
            env = dict(self.env[config])
            env.update({i.name: self._pending(i.name, config) for i in self.pending})
            try:
                with warnings.catch_warnings(), torch.no_grad():
                    warnings.simplefilter("ignore")
                    result = evaluate(expr, env)
            except Exception:  # eager rejects the op (dtype, shape, index): not a program
                return None
            results.append(result)
        return results if _well_formed(results) else None

    def _small_enough(self, expr):
        """Whether the result stays within MAX_NUMEL at every configuration, found on meta
        tensors (no data), so that an op broadcasting two large tensors is never run."""
        for config in range(self.configs):
            env = {
                name: self.tensor(name, config).to("meta")
                for name in self.names() + [i.name for i in self.pending]
            }
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    result = evaluate(expr, env)
            except Exception:
                return False
            if not isinstance(result, torch.Tensor) or result.numel() > MAX_NUMEL:
                return False
        return True

    def primary_inputs(self):
        for _ in range(self.rng.choice((1, 2, 2, 3))):
            self.pending, self._built = [], {}
            dims = self.random_dims()
            while any(_numel(dims, c) > MAX_NUMEL for c in range(self.configs)):
                dims = self.random_dims()
            self.new_input(dims)
            if not self._consistent():  # a layout's strides equal some size: keep it dense
                self.pending = [replace(self.pending[0], layout=())]
                self._built = {}
            self.inputs += self.pending
            for config in range(self.configs):
                self._add_inputs(config)
        self.pending = []


def size_pool(rng, configs):
    """Three sizes (per configuration) a program's dims draw from, besides 1. With several
    configurations, sizes are >= 2 and distinct within each configuration, so dynamo's duck
    sizing sees the same equalities at every configuration. Programs compiled together share
    one pool, for the same reason."""
    if configs == 1:
        pool = [(s,) for s in rng.sample(range(2, 8), 3)]
    else:
        columns = [rng.sample(range(2, 9), 3) for _ in range(configs)]
        pool = [tuple(col[i] for col in columns) for i in range(3)]
    if rng.random() < LARGE_SHARE:
        pool[-1] = tuple(rng.sample(range(*LARGE_SIZES), configs))
    return pool


def _numel(dims, config):
    numel = 1
    for size in dims:
        numel *= size[config]
    return numel


def _mentions(expr, name):
    return re.search(rf"\b{re.escape(name)}\b", expr) is not None


def _well_formed(results):
    first = results[0]
    if not isinstance(first, torch.Tensor):
        return False
    for t in results:
        if not isinstance(t, torch.Tensor) or t.dim() > 5 or t.dim() != first.dim():
            return False
        if t.numel() == 0 or t.numel() > MAX_NUMEL or t.dtype != first.dtype:
            return False
        if [s == 1 for s in t.shape] != [s == 1 for s in first.shape]:
            return False
        if t.dtype in INT_DTYPES and t.numel() and t.abs().max() > INT_LIMIT:
            return False
    return True


def consistent_sizes(tensors_per_config):
    """Whether the inputs' sizes and strides that are equal at the first size configuration
    are equal at every one, and those that are 0 or 1 are so at every one. Dynamo gives
    equal sizes and strides one symbol when it traces (duck sizing) and specializes 0 and 1,
    so any other pattern would recompile, which the dynamic check reports."""
    patterns = []
    for tensors in tensors_per_config:
        # a view's base counts too: dynamo guards the sizes of the tensor it views
        tensors = [b for t in tensors for b in (t, t._base) if b is not None]
        numbers = [n for t in tensors for n in (*t.shape, *t.stride())]
        patterns.append([(numbers.index(n), n if n <= 1 else None) for n in numbers])
    return all(p == patterns[0] for p in patterns)


def validate(program):
    """Whether eager runs `program` (forward, and backward if an input needs gradients) at
    every configuration with well-formed values and no float -> integer conversion of a
    value that has none (nan, inf, out of range): what a shrunk program must still satisfy."""
    if not program.ops or not consistent_sizes(
        [program.build_inputs(c) for c in range(program.configs)]
    ):
        return False
    for config in range(program.configs):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                env = program.run(program.build_inputs(config))
                if not all(
                    _well_formed([env[op.out]])
                    and converts_safely(op.expr, [env[u] for u in op.uses])
                    for op in program.ops
                ):
                    return False
                if any(i.grad for i in program.inputs) and not _finite(env):
                    return False
                _backward(program, env)
        except Exception:
            return False
    return True


INTEGER_CAST = re.compile(r"\.(long|int)\(\)|torch\.int(32|64)\b")


def converts_safely(expr, used):
    """False if `expr` converts a float value to an integer type while a float tensor it
    reads holds nan, inf or a value out of int32 range: undefined behaviour in C++, and
    eager's result is whatever its vector code gives."""
    if not INTEGER_CAST.search(expr):
        return True
    return all(t.isfinite().all() and t.abs().max() < 2**31 for t in used if t.is_floating_point())


def _finite(env):
    """Whether every float value is finite. Gradients are only compared then: eager's own
    gradient at nan depends on its code path (hardswish's and elu's backward give nan in the
    vector loop, the incoming gradient in the scalar one), so no answer is the right one."""
    return all(t.isfinite().all() for t in env.values() if t.is_floating_point())


def _backward(program, env):
    outs = [env[o] for o in program.outputs if env[o].requires_grad]
    leaves = [env[i.name] for i in program.inputs if i.grad]
    if outs and leaves:
        torch.autograd.grad([o.sum() for o in outs], leaves, allow_unused=True)


def generate(seed, configs=1, max_ops=8, backward=True, families=FAMILIES, name=None, sizes=None):
    """A random program (deterministic in its arguments) with 1..max_ops ops, or None if eager
    rejects every attempt. `sizes`: the size pool (default: the program's own)."""
    g = Generator(seed, configs, backward, sizes)
    g.primary_inputs()
    catalog = [
        (fn, family, weight) for fn, (family, weight) in CATALOG.items() if family in families
    ]
    wanted = g.rng.randint(1, max_ops)
    for _ in range(wanted * 12):
        if len(g.ops) >= wanted:
            break
        fn, family, _ = g.rng.choices(catalog, [w for *_, w in catalog])[0]
        g.try_op(fn, family)
    if not g.ops:
        return None
    outputs = [g.ops[-1].out]
    others = [op.out for op in g.ops[:-1]]
    outputs += g.rng.sample(others, min(len(others), g.rng.choice((0, 0, 1, 2))))
    program = Program(
        name or f"p{seed}", tuple(g.inputs), tuple(g.ops), tuple(outputs), configs, seed
    ).live()
    if validate(program):
        return program
    # floor_divide has no derivative; a value is nan or inf: the program still runs forward
    program = replace(program, inputs=tuple(replace(i, grad=False) for i in program.inputs))
    return program if validate(program) else None


def float_dtypes():
    return FLOAT_DTYPES

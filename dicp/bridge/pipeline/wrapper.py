"""WrapperBuilder: the Python `call(args)` that binds sizes, allocates, calls kernels and runs
eager fallbacks. Shared by every backend: a vendor's codegen appends lines for its kernels."""
import math
import re
from dataclasses import dataclass

import sympy
import torch

from .symbolic import is_dense, last_offset, py_expr, shape_of, strides_of
from .templating import SHARED_TEMPLATES, render

_NAME = re.compile(r"\bbuf\d+\b")


def _same_extent(layout, other):
    """Whether two layouts, (sizes, strides) each, span as many elements from their first."""
    return sympy.expand(last_offset(*layout) - last_offset(*other)) == 0


class Var(str):
    """A wrapper variable name (printed bare, unlike a string argument)."""


@dataclass
class TensorView:
    """Memory a wrapper variable holds, seen with `sizes`, `strides` and an element `offset`
    from its data pointer; the wrapper prints it as that variable or an as_strided view."""
    base: str            # wrapper variable holding the tensor
    dtype: object
    sizes: list
    strides: list
    offset: object = 0


class WrapperBuilder:
    def __init__(self, graph_name, target):
        self.graph_name = graph_name
        self.target = target
        self.inputs, self.lines, self.outputs = [], [], []
        self.bound: set = set()
        self.constants: dict = {}
        self.layouts: dict = {}  # wrapper var -> (sizes, strides) of the tensor it holds
        # Buffers this wrapper allocated that no other variable can view yet: no ATen call
        # has seen them. Only these may be written through a `__restrict__` pointer.
        self.private: set = set()
        self.dtypes: dict = {}       # private buffer -> its dtype
        self._allocations: dict = {}  # buffer -> the index of the line allocating it
        self._in_place: list = []     # (output, source, call line): see offer_in_place
        self._named_private: dict = {}  # call result -> the private buffers its call names
        self._writes_out: set = set()   # results of calls that take memory as `out=`
        self._next = 0

    def fresh(self, prefix="buf"):
        self._next += 1
        return f"{prefix}{self._next}"

    # ---- symbols ----
    def bind(self, expr, source):
        """Bind a size symbol from a runtime value the first time it is seen."""
        expr = sympy.sympify(expr)
        if isinstance(expr, sympy.Symbol) and expr not in self.bound:
            self.lines.append(f"{expr.name} = {source}")
            self.bound.add(expr)

    def bind_tensor(self, name, fake):
        for d, size in enumerate(shape_of(fake)):
            self.bind(size, f"{name}.size({d})")

    def bind_strides(self, name, fake):
        for d, stride in enumerate(strides_of(fake)):
            self.bind(stride, f"{name}.stride({d})")

    # ---- values as Python source ----
    def literal(self, value):
        if isinstance(value, Var):
            return str(value)
        if isinstance(value, TensorView):
            return self.view(value)
        if isinstance(value, (list, tuple)):
            items = ", ".join(self.literal(v) for v in value)
            if isinstance(value, list):
                return f"[{items}]"
            return f"({items}{',' if len(value) == 1 else ''})"
        if isinstance(value, sympy.Basic):
            return py_expr(value)
        if isinstance(value, float) and not math.isfinite(value):
            return f"float('{value}')"
        if value is None or isinstance(value, (bool, int, float, str)):
            return repr(value)
        if isinstance(value, (torch.dtype, torch.memory_format, torch.layout)):
            return str(value)
        return self.constant(value)

    def constant(self, value):
        name = Var(f"const{len(self.constants)}")
        self.constants[str(name)] = value
        return name

    def view(self, buffer: TensorView) -> str:
        layout = (buffer.sizes, buffer.strides)
        if self.layouts.get(buffer.base) == layout and buffer.offset == 0:
            return buffer.base
        return (f"torch.as_strided({buffer.base}, {self.literal(list(buffer.sizes))}, "
                f"{self.literal(list(buffer.strides))}, "
                f"{buffer.base}.storage_offset() + {self.literal(sympy.sympify(buffer.offset))})")

    # ---- statements ----
    def allocate(self, dtype, sizes, strides):
        name = self.fresh()
        self.own(name, dtype, sizes, strides)
        self._allocations[name] = len(self.lines)
        self.lines.append(f"{name} = torch.empty_strided({self.literal(tuple(sizes))}, "
                          f"{self.literal(tuple(strides))}, dtype={dtype})")
        return name

    def own(self, name, dtype, sizes, strides):
        """Record `name` as private: memory of exactly this layout (from offset 0) that no
        other variable views (a fresh allocation, or a call's result that is new memory)."""
        self.private.add(name)
        self.dtypes[name] = dtype
        self.layouts[name] = (list(sizes), list(strides))

    def own_fresh_result(self, name, dtype, sizes, strides, writes_out=False):
        """`name`, just assigned from a library call, is new memory (see own), and the call
        keeps no view of its arguments (a matrix product): those private before it stay so.
        `writes_out`: the call takes `out=`, memory of the result's layout to write into
        (see _reuse_dead_memory), and returns what it wrote."""
        self.private |= self._named_private.get(name, set())
        self.own(name, dtype, sizes, strides)
        if writes_out:
            self._writes_out.add(name)

    def assign(self, expr: str) -> "Var":
        """A fresh variable bound to the Python expression `expr`, which may view any buffer
        it names: those are no longer private."""
        name = Var(self.fresh())
        self._named_private[name] = set(_NAME.findall(expr)) & self.private
        self.private -= self._named_private[name]
        self.lines.append(f"{name} = {expr}")
        return name

    def call_op(self, op_source, args, kwargs):
        rendered = [self.literal(a) for a in args]
        rendered += [f"{k}={self.literal(v)}" for k, v in kwargs.items()]
        return self.assign(f"{op_source}({', '.join(rendered)})")

    # ---- buffer reuse ----
    def may_share(self, output, source) -> bool:
        """Whether kernel output `output` (allocated, not yet written) could take the memory of
        private buffer `source`: the same dtype and extent of memory (a [4, 128, 256] sum may
        take a [512, 256] product's), each element at an address of its own in both."""
        if not (output in self._allocations and source in self.private and
                output in self.private and self.dtypes[output] == self.dtypes[source]):
            return False
        if not all(is_dense(*self.layouts[name]) for name in (output, source)):
            return False  # an expanded output's later stores would feed its own loads
        return _same_extent(self.layouts[output], self.layouts[source])

    def offer_in_place(self, output, source):
        """The kernel call just appended reads `source` only where it writes `output`, each
        element before writing it (see may_share). If that call is the last use of `source`
        and `source` is no graph output, `output` is `source` instead of a new allocation:
        no new memory (a fresh buffer's first touch costs a page fault per 4 KB; a 4 MB
        batch norm after a convolution ran 4x slower than in place)."""
        self._in_place.append((output, source, len(self.lines) - 1))

    def render(self):
        return render(SHARED_TEMPLATES, "wrapper.py.j2", graph_name=self.graph_name,
                      target=self.target, inputs=self.inputs, lines=self.free_dead_buffers(),
                      outputs=self.outputs)

    def _last_uses(self, lines):
        last_use = {}
        for number, line in enumerate(lines):
            for name in _NAME.findall(line):
                last_use[name] = number
        return last_use

    def _reuse_dying_sources(self, returned):
        """The wrapper's lines with each offer_in_place taken where its source dies at the call
        and nothing between the output's allocation and the call names the output (a
        concatenation's earlier kernels write into it). The allocation goes; the output is
        bound to the source just before the call. Taking an offer moves no name's last use
        (the call names both), so one pass over the lines decides every offer, chains (a
        kernel in place of a buffer that itself took another's memory) included. Also
        returns the offers taken, output -> source."""
        last_use = self._last_uses(self.lines)
        taken = {}
        blocks = [[line] for line in self.lines]  # each line and what replaces it
        for output, source, call in self._in_place:
            allocation = self._allocations[output]
            if source in returned or last_use.get(source) != call or any(
                    output in _NAME.findall(line) for line in self.lines[allocation + 1:call]):
                continue
            blocks[allocation] = []
            blocks[call] = [f"{output} = {self._as_laid_out(source, output)}  # in place",
                            *blocks[call]]
            taken[output] = source
        return [line for block in blocks for line in block], taken

    def _as_laid_out(self, source, output):
        """`source` as the Python value of `output`: itself, or a view with `output`'s strides
        where they differ on dims of size 1."""
        (sizes, strides), source_layout = self.layouts[output], self.layouts[source]
        if source_layout == (sizes, strides):
            return source
        return f"{source}.as_strided({self.literal(list(sizes))}, {self.literal(list(strides))})"

    def free_dead_buffers(self):
        """`del` each intermediate after its last use, so peak memory follows liveness."""
        returned = set(_NAME.findall(" ".join(self.outputs)))
        lines_in = self._reuse_dead_memory(*self._reuse_dying_sources(returned), returned)
        last_use = self._last_uses(lines_in)
        frees = {}
        for name, number in last_use.items():
            if name not in returned:
                frees.setdefault(number, []).append(name)
        lines = []
        for number, line in enumerate(lines_in):
            lines.append(line)
            if number in frees:
                lines.append(f"del {', '.join(sorted(frees[number]))}")
        return lines

    def _reuse_dead_memory(self, lines, in_place, returned):
        """`lines` with each new buffer taking the memory of a dead one of the same dtype and
        extent where there is one, as Inductor's wrapper reuses buffers: memory just freed
        is in cache and mapped, a fresh allocation of a few MB is neither (five matrix
        products of a LLaMA block: 4.9 ms into fresh results, 4.6 ms into reused ones).
        Memory is a group of names (a buffer and those in place of it or reusing it); it
        is dead after the last line naming any of them, if all are private and none is
        returned. A kernel writes every element of its output, so stale contents are never
        read. `in_place`: the outputs written in place of a source, output -> source."""
        last_use = self._last_uses(lines)
        group = {}      # buffer -> the first buffer of its memory
        members = {}    # first buffer -> every buffer on that memory
        dead = []       # names of dead memory, oldest first
        pooled = set()  # first buffers of the memory in `dead`
        out = []
        for number, line in enumerate(lines):
            line = self._take_dead_memory(line, in_place, dead, pooled, group, members)
            out.append(line)
            for name in sorted(set(_NAME.findall(line))):
                root = group.get(name)
                if root is not None and root not in pooled and last_use.get(name) == number \
                        and all(last_use.get(m, -1) <= number for m in members[root]) \
                        and not members[root] & returned and members[root] <= self.private:
                    dead.append(name)
                    pooled.add(root)
        return out

    def _take_dead_memory(self, line, in_place, dead, pooled, group, members):
        """One line, rewritten to take dead memory if it allocates or writes a result; a line
        creating a private buffer starts (or joins) a group of memory."""
        name = line.split(" = ", 1)[0]
        if name in in_place:
            root = group.get(in_place[name])
            if root is not None:
                group[name] = root
                members[root] = members[root] | {name}
            return line
        allocates = name in self._allocations and \
            line.startswith(f"{name} = torch.empty_strided(")
        if name not in self.private or name not in self.dtypes:
            return line  # no buffer of its own: an input, a view, another call's result
        takes_memory = allocates or name in self._writes_out  # else a convolution's result
        donor = next((d for d in dead if self._fits(name, d)), None) if takes_memory else None
        if donor is None:
            group[name], members[name] = name, {name}
            return line
        dead.remove(donor)
        root = group[donor]
        pooled.discard(root)
        group[name] = root
        members[root] = members[root] | {name}
        memory = self._as_laid_out(donor, name)
        if allocates:
            return f"{name} = {memory}  # reuses {donor}'s memory"
        return f"{line[:-1]}, out={memory})  # into {donor}'s memory"

    def _fits(self, name, donor):
        """Whether buffer `name` can take dead buffer `donor`'s memory: same dtype, both dense
        (see may_share), the same extent."""
        if self.dtypes.get(name) != self.dtypes.get(donor) or donor not in self.layouts:
            return False
        if not all(is_dense(*self.layouts[n]) for n in (name, donor)):
            return False
        return _same_extent(self.layouts[name], self.layouts[donor])

"""KernelBuilder: collects one C++ kernel's parameters and body, with CSE and masked scopes."""
from dataclasses import dataclass, field

import sympy

from .ctypes_map import storage_ctype
from .sym import cpp_expr


@dataclass
class Param:
    name: str
    ctype: str
    base: str          # the wrapper variable whose data pointer is passed
    writable: bool = False


@dataclass
class Block:
    lines: list = field(default_factory=list)
    cse: dict = field(default_factory=dict)


class KernelBuilder:
    """Statements are emitted into the innermost open block; CSE is scoped to blocks."""

    def __init__(self, name, loop_vars=()):
        self.name = name
        self.params: dict[str, Param] = {}
        self.symbols: set = set()
        self.loop_vars = set(loop_vars)
        self.blocks = [Block()]
        self._next = 0

    # ---- parameters ----
    def pointer(self, base, dtype, writable=False) -> str:
        if base not in self.params:
            prefix = "out" if writable else "in"
            self.params[base] = Param(f"{prefix}_{base}", storage_ctype(dtype), base, writable)
        param = self.params[base]
        param.writable = param.writable or writable
        return param.name

    def index(self, expr) -> str:
        """C++ text of an index/size expression, recording the size symbols it needs."""
        expr = sympy.sympify(expr)
        self.symbols |= {s for s in expr.free_symbols if s not in self.loop_vars}
        return cpp_expr(expr)

    # ---- statements ----
    def emit(self, expr: str, ctype: str) -> str:
        for block in reversed(self.blocks):
            if expr in block.cse:
                return block.cse[expr]
        var = self._fresh()
        self.blocks[-1].lines.append(f"const {ctype} {var} = {expr};")
        self.blocks[-1].cse[expr] = var
        return var

    def line(self, text: str):
        self.blocks[-1].lines.append(text)

    def masked(self, condition: str, body, other: str, ctype: str) -> str:
        """`body()` evaluated only where `condition` holds, else `other` (no stray loads)."""
        var = self._fresh()
        self.line(f"{ctype} {var} = {other};")
        self.line(f"if ({condition}) {{")
        self.line(f"  {var} = {self._scoped(body)};")
        self.line("}")
        return var

    def select_first(self, cases, ctype: str) -> str:
        """The value of the first (condition, body) case that holds; each body runs only there."""
        var = self._fresh()
        self.line(f"{ctype} {var};")
        for i, (condition, body) in enumerate(cases):
            self.line(f"{'if' if i == 0 else '} else if'} ({condition}) {{")
            self.line(f"  {var} = {self._scoped(body)};")
        self.line("}")
        return var

    def forget_values(self):
        """After a store, earlier loads may be stale: stop reusing them."""
        self.blocks[-1].cse.clear()

    def _scoped(self, body):
        self.blocks.append(Block())
        value = body()
        inner = self.blocks.pop()
        self.blocks[-1].lines.extend("  " + line for line in inner.lines)
        return value

    def _fresh(self):
        var = f"t{self._next}"
        self._next += 1
        return var

    def take_lines(self):
        lines = self.blocks[0].lines
        self.blocks = [Block()]
        return lines

    def signature(self):
        params = sorted(self.params.values(), key=lambda p: (not p.writable, p.name))
        pointers = [f"{'' if p.writable else 'const '}{p.ctype}* __restrict__ {p.name}"
                    for p in params]
        symbols = sorted(self.symbols, key=str)
        return pointers + [f"int64_t {s}" for s in symbols], params, symbols

"""Program inputs: a spec per input, and the one function that builds its tensor.

`make_tensor` uses torch only: a repro embeds its source (inspect.getsource), so the fuzzer
and every repro it prints build bit-identical inputs from the same seed.
"""

from dataclasses import dataclass, replace

import torch

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
INT_DTYPES = (torch.int64, torch.int32)
ALL_DTYPES = FLOAT_DTYPES + INT_DTYPES + (torch.bool,)


def make_tensor(shape, dtype, kind, seed, args=(), layout=(), grad=False):
    """A deterministic tensor of logical `shape`.

    kind: "float" (randn * 2), "special" (float with some nan/inf/-inf/0/-0), "int"
    (uniform in [args[0], args[1])), "bool", "perm" (unique indices along dim args[0]: a random
    permutation prefix of range(args[1])). layout: () contiguous; ("permute", order): stored in
    `order` and permuted back (non-contiguous); ("slice", dim, step, start): a strided slice of a
    larger tensor (gaps, storage offset); ("expand", dim): stride 0 along `dim`.
    """
    g = torch.Generator().manual_seed(seed)
    stored = list(shape)
    if layout and layout[0] == "permute":
        stored = [shape[d] for d in layout[1]]
    elif layout and layout[0] == "slice":
        stored[layout[1]] = shape[layout[1]] * layout[2] + layout[3]
    elif layout and layout[0] == "expand":
        stored[layout[1]] = 1
    if kind in ("float", "special"):
        t = torch.randn(stored, generator=g, dtype=torch.float64) * 2
        if kind == "special":
            specials = torch.tensor(
                [float("nan"), float("inf"), -float("inf"), 0.0, -0.0], dtype=torch.float64
            )
            picks = specials[torch.randint(0, 5, stored, generator=g)]
            t = torch.where(torch.rand(stored, generator=g) < 0.2, picks, t)
    elif kind == "int":
        t = torch.randint(args[0], args[1], stored, generator=g)
    elif kind == "bool":
        t = torch.rand(stored, generator=g) < 0.5
    else:  # perm
        dim, n = args
        full = list(stored)
        full[dim] = n
        t = torch.rand(full, generator=g).argsort(dim).narrow(dim, 0, stored[dim])
    t = t.to(dtype)
    if grad:
        t.requires_grad_()
    if layout and layout[0] == "permute":
        t = t.permute([layout[1].index(d) for d in range(len(shape))])
    elif layout and layout[0] == "slice":
        t = t.narrow(layout[1], layout[3], stored[layout[1]] - layout[3])
        t = t[(slice(None),) * layout[1] + (slice(None, None, layout[2]),)]
    elif layout and layout[0] == "expand":
        t = t.expand(shape)
    return t


@dataclass(frozen=True)
class Input:
    """One program input. `dims` holds, per dim, its size at each size configuration (one
    configuration for static shapes, 2-3 for dynamic ones); `args` of a "perm" kind holds the
    permuted range per configuration."""

    name: str
    dims: tuple
    dtype: torch.dtype
    kind: str
    seed: int
    args: tuple = ()
    layout: tuple = ()
    grad: bool = False

    def shape(self, config):
        return tuple(d[config] for d in self.dims)

    def kind_args(self, config):
        return (self.args[0], self.args[1][config]) if self.kind == "perm" else self.args

    def build(self, config):
        return make_tensor(
            self.shape(config),
            self.dtype,
            self.kind,
            self.seed + 7919 * config,
            self.kind_args(config),
            self.layout,
            self.grad,
        )

    def call_source(self, configs, config_var="config"):
        """Python text building this input at configuration `config_var` (for repros)."""
        shapes = [self.shape(c) for c in range(configs)]
        shape = f"{shapes}[{config_var}]" if len(set(shapes)) > 1 else repr(shapes[0])
        args = repr(self.args)
        if self.kind == "perm":
            args = f"({self.args[0]}, {list(self.args[1])}[{config_var}])"
        return (
            f"make_tensor({shape}, {self.dtype}, {self.kind!r}, {self.seed} + 7919 * "
            f"{config_var}, {args}, {self.layout!r}, grad={self.grad})"
        )

    def simpler(self, **changes):
        return replace(self, **changes)

    @property
    def is_float(self):
        return self.dtype.is_floating_point

"""OpInfo sample inputs as data the conformance check can batch, copy, widen and resize.

A `Sample` is one SampleInput with its tensors taken out: `structure` is `(input, args, kwargs)`
with each tensor replaced by a `Slot`. Many samples are compiled as one function whose
arguments are every sample's tensors and whose result is every sample's output, so one graph
(one C++ build) checks them all. That function is generated as Python source calling the op
directly (`batched_call`): dynamo then traces one call per sample, not the Python that would
rebuild the arguments (tracing a pytree rebuild cost ~0.15 s per sample).
"""

from dataclasses import dataclass, field, replace
from keyword import iskeyword

import torch

from ..common.accuracy import snapshot, widened

# At most this many samples per (op, dtype): some OpInfos have hundreds (max_pool2d 1440), and a
# graph's build time grows with its size (~30 ms of g++ per kernel). The kept ones are spread
# evenly over the list, so every kind of sample the OpInfo generates (shapes, keyword variants)
# stays represented. float32 is the reference dtype and gets the most; the other dtypes check
# dtype handling on fewer.
SAMPLE_LIMITS = {torch.float32: 24, "other dtypes": 12}
# The fast subset in the default suite takes fewer, with the same spread.
FAST_SAMPLE_LIMITS = {torch.float32: 8, "other dtypes": 4}


@dataclass(frozen=True)
class Slot:
    """Where a tensor sits in a sample's arguments."""

    index: int


@dataclass
class Sample:
    index: int  # position in the OpInfo's sample list
    dtype: torch.dtype
    structure: tuple  # (input, args, kwargs) with tensors replaced by Slots
    tensors: list
    output_process_fn_grad: object = None
    description: str = ""
    expected: object = None  # eager's output (grad mode: output and input gradients)
    cotangents: list = field(default_factory=list)  # grad mode: the outputs' incoming gradients

    def with_tensors(self, tensors):
        """This sample with other tensors (eager results not yet known)."""
        return replace(self, tensors=list(tensors), expected=None, cotangents=[])

    def call(self, op, tensors):
        inp, args, kwargs = _fill(self.structure, tensors)
        return op(inp, *args, **kwargs)

    def copies(self, copy=snapshot):
        """Fresh copies of the tensors (same storage layout); a tensor used twice is copied
        once, so aliasing inside a sample is kept."""
        made = {}
        for tensor in self.tensors:
            if id(tensor) not in made:
                made[id(tensor)] = copy(tensor)
        return [made[id(t)] for t in self.tensors]


def _fill(value, tensors):
    if isinstance(value, Slot):
        return tensors[value.index]
    if type(value) in (tuple, list):
        return type(value)(_fill(v, tensors) for v in value)
    if type(value) is dict:
        return {k: _fill(v, tensors) for k, v in value.items()}
    return value


def _slots(value, tensors):
    """`value` with every tensor inside plain tuples, lists and dicts replaced by a Slot."""
    if isinstance(value, torch.Tensor):
        tensors.append(value)
        return Slot(len(tensors) - 1)
    if type(value) in (tuple, list):
        return type(value)(_slots(v, tensors) for v in value)
    if type(value) is dict:
        return {k: _slots(v, tensors) for k, v in value.items()}
    return value


def from_sample_input(index, dtype, sample_input) -> Sample:
    tensors = []
    structure = _slots(
        (sample_input.input, tuple(sample_input.args), dict(sample_input.kwargs)), tensors
    )
    return Sample(
        index,
        dtype,
        structure,
        tensors,
        getattr(sample_input, "output_process_fn_grad", None),
        _describe(sample_input),
    )


def _describe(sample_input) -> str:
    def one(value):
        if isinstance(value, torch.Tensor):
            return f"{str(value.dtype).removeprefix('torch.')}{list(value.shape)}"
        if isinstance(value, (tuple, list)) and any(isinstance(v, torch.Tensor) for v in value):
            return "[" + ", ".join(one(v) for v in value) + "]"
        return repr(value)

    parts = [one(sample_input.input)] + [one(a) for a in sample_input.args]
    parts += [f"{k}={one(v)}" for k, v in sample_input.kwargs.items()]
    text = ", ".join(parts)
    return text if len(text) <= 300 else text[:297] + "..."


def spread(items, limit):
    """At most `limit` of `items`, evenly spaced, first and last included."""
    if len(items) <= limit:
        return list(items)
    step = (len(items) - 1) / (limit - 1)
    return [items[round(i * step)] for i in range(limit)]


def generate(opinfo, dtype, requires_grad=False, limits=SAMPLE_LIMITS):
    """The OpInfo's samples for `dtype` on the CPU, at most `limits` of them."""
    inputs = list(opinfo.sample_inputs("cpu", dtype, requires_grad=requires_grad))
    indexed = spread(list(enumerate(inputs)), limits.get(dtype, limits["other dtypes"]))
    return [from_sample_input(i, dtype, s) for i, s in indexed]


# ---- one function for many samples --------------------------------------------------------------


def batched_call(op, samples, device="cpu"):
    """fn(*tensors) -> tuple of every sample's output; its arguments are the samples' tensors,
    concatenated in order. Generated source: `return (op(t0, c0, dim=c1), op(t1, ...), ...)`.
    A factory sample's `device=` (the host's, where samples are made) names `device`, where
    the call's tensors go (a device backend's), as eager on that device would be called."""
    constants, calls, start = {"op": op}, [], 0
    for sample in samples:
        inp, args, kwargs = sample.structure
        if "device" in kwargs:
            kwargs = {**kwargs, "device": device}
        render = _Renderer(constants, start)
        parts = [render(inp)] + [render(a) for a in args]
        parts += [
            f"{k}={render(v)}"
            if k.isidentifier() and not iskeyword(k)
            else f"**{{{render(k)}: {render(v)}}}"
            for k, v in kwargs.items()
        ]
        calls.append(f"op({', '.join(parts)})")
        start += len(sample.tensors)
    params = ", ".join(f"t{i}" for i in range(start))
    source = f"def fn({params}):\n    return ({', '.join(calls)},)\n"
    namespace = dict(constants)
    exec(compile(source, "<opinfo batched call>", "exec"), namespace)
    return namespace["fn"]


class _Renderer:
    """Python source for a sample's argument: tensors as parameters, other leaves as named
    constants (any object), containers spelled out so dynamo sees plain literals."""

    def __init__(self, constants, start):
        self.constants, self.start = constants, start

    def __call__(self, value):
        if isinstance(value, Slot):
            return f"t{self.start + value.index}"
        if type(value) is tuple:
            return "(" + "".join(f"{self(v)}, " for v in value) + ")"
        if type(value) is list:
            return "[" + ", ".join(self(v) for v in value) + "]"
        if type(value) is dict:
            return "{" + ", ".join(f"{self(k)}: {self(v)}" for k, v in value.items()) + "}"
        name = f"c{len(self.constants)}"
        self.constants[name] = value
        return name


def float64_copies(sample):
    return sample.copies(widened)


# ---- a second size, for dynamic shapes ----------------------------------------------------------


def grown(tensor):
    """`tensor` with every dim above 1 grown by one, the new positions repeating existing
    values (index tensors stay valid, since the dims they index grow too). Dims of 0 and 1
    stay, so broadcasting and dynamo's 0/1 specialization see the same graph; dims that were
    equal stay equal."""
    if tensor.dim() == 0 or tensor.numel() == 0:
        return snapshot(tensor)
    value = tensor.detach()
    for dim, size in enumerate(value.shape):
        if size > 1:
            value = value.index_select(dim, torch.arange(size + 1) % size)
    value = value.clone()
    return value.requires_grad_() if tensor.requires_grad else value

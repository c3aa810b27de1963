"""DICP_RECORD_RESULTS=<file>: a digest of what every compiled graph returned and left in its
inputs, call by call, written to the file at exit. Two runs of one program, a cold and a warm
one say, must record the same lines: `compare` names the first call where they part.

Each line is one call of a compiled ATen graph (forward, backward or inference, in call order):
its kind and, per output and then per input after the call (which shows in-place updates such
as an optimizer's), the dtype, shape, strides and a sha256 of the bytes. Bytes, not values: a
NaN equals itself and -0.0 differs from 0.0, so equal records mean bit-for-bit equal results.
"""

import atexit
import hashlib
import json
from pathlib import Path

import torch

from dicp import config

_CALLS: list = []
_WRITER_REGISTERED: list = []


def recording(fn, kind: str):
    """`fn(args)` (boxed), recording each call's digest when DICP_RECORD_RESULTS is set."""
    if config.record_results is None:
        return fn
    _register_writer()

    def call(args):
        inputs = list(args)  # fn may empty the list
        outputs = fn(args)
        _CALLS.append({"kind": kind, "outputs": _digests(outputs), "inputs": _digests(inputs)})
        return outputs

    return call


def _register_writer():
    if not _WRITER_REGISTERED:
        atexit.register(_write)
        _WRITER_REGISTERED.append(True)


def _write():
    path = config.record_results
    if path is not None:
        Path(path).write_text("".join(json.dumps(c, sort_keys=True) + "\n" for c in _CALLS))


def _digests(values) -> list:
    values = values if isinstance(values, (list, tuple)) else [values]
    return [_digest(v) for v in values]


def _digest(value) -> str:
    if not isinstance(value, torch.Tensor):
        return f"{type(value).__name__}:{value!r}"
    # a fresh dense copy: contiguous() keeps a size-1 dim's stride, which view() refuses
    host = torch.empty(value.numel(), dtype=value.dtype).copy_(value.detach().reshape(-1))
    data = host.view(torch.uint8).numpy().tobytes() if host.numel() else b""
    return (
        f"{value.dtype}{tuple(value.shape)}{value.stride()}:{hashlib.sha256(data).hexdigest()[:16]}"
    )


def read(path) -> list:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def compare(first: list, second: list) -> str | None:
    """None if two records are equal, else where they first differ."""
    for index, (a, b) in enumerate(zip(first, second)):
        if a != b:
            return f"call {index} ({a['kind']} graph): {_first_difference(a, b)}"
    if len(first) != len(second):
        return f"{len(first)} compiled-graph calls against {len(second)}"
    return None


def _first_difference(a, b) -> str:
    if a["kind"] != b["kind"]:
        return f"a {a['kind']} graph against a {b['kind']} graph"
    for part in ("outputs", "inputs"):
        for index, (x, y) in enumerate(zip(a[part], b[part])):
            if x != y:
                return f"{part[:-1]} {index}: {x} against {y}"
        if len(a[part]) != len(b[part]):
            return f"{len(a[part])} {part} against {len(b[part])}"
    return "equal"

"""Reports on the emulated device's eager ops: op-argument dumps and autocompare.

Dumps (DICP_DUMP_OP_ARGS, DIPU's levels, as for compiled graphs): 1 each compute op's name,
whether it ran natively or fell back, and its device, before it runs (so a crash is placed);
2 also its arguments' and results' shapes, dtypes, strides and devices; 3 also value summaries
(min, max, mean, NaN and Inf counts), which copies each tensor to the host and so waits for it.
Lines go to the `dicp.op_args` logger, or are appended to DICP_DUMP_OP_ARGS_FILE.

Autocompare (DICP_AUTOCOMPARE): each native op's results against the op run on host copies of
its inputs, with the single-op tolerances of dicp.tolerance; a mismatch names the op and the
first disagreeing element. `1` logs the first mismatch of each op, `raise` raises
EagerAutocompareError.
"""

import logging
import sys

import torch

from dicp import config
from dicp.tolerance import TOLERANCES, tolerance_for
from dicp.tolerance import compare as compare_tensors

log = logging.getLogger("dicp.emu")
dump_log = logging.getLogger("dicp.op_args")

_reported: set = set()


class EagerAutocompareError(AssertionError):
    """DICP_AUTOCOMPARE=raise: a native emu op disagrees with the CPU; the message says where."""


# ---- dumps ----


def dump(op: str, stage: str, values: list, level: int) -> None:
    """The kernels call this before an op runs (stage "native" or "fallback": its arguments)
    and after (stage "out": its results)."""
    if stage != "out":
        lines = [f"dicp emu op-args: {op} [{stage}] {_device_of(values)}"]
        lines += [f"  in: {_briefs(values)}"] if level >= 2 else []
        label = "in"
    else:
        lines = [f"  out: {_briefs(values)}"] if level >= 2 else []
        label = "out"
    if level >= 3:
        lines += [f"  {label}{i}: {_summary(t)}" for i, t in enumerate(_tensors(values))]
    _emit(lines)


def _tensors(values):
    for value in values:
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, list):
            yield from _tensors(value)


def _device_of(values) -> str:
    devices = {str(t.device) for t in _tensors(values) if t.device.type == "emu"}
    return ", ".join(sorted(devices)) or "no emu tensor"


def _briefs(values) -> str:
    return ", ".join(_brief(v) for v in values) or "none"


def _brief(value) -> str:
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        return f"{dtype}{list(value.shape)} strides {list(value.stride())} {value.device}"
    if isinstance(value, list) and any(isinstance(v, torch.Tensor) for v in value):
        return "[" + ", ".join(_brief(v) for v in value) + "]"
    return repr(value)


def _summary(t: torch.Tensor) -> str:
    dtype = str(t.dtype).removeprefix("torch.")
    where = f"{dtype}{list(t.shape)} {t.device}"
    if t.numel() == 0:
        return f"{where} empty"
    values = t.detach().cpu()
    values = (values.abs() if values.is_complex() else values).double()
    finite = values[torch.isfinite(values)]
    low, high, mean = (
        (finite.min().item(), finite.max().item(), finite.mean().item())
        if finite.numel()
        else (float("nan"),) * 3
    )
    nan, inf = int(torch.isnan(values).sum()), int(torch.isinf(values).sum())
    return f"{where} min {low:.6g} max {high:.6g} mean {mean:.6g} nan {nan} inf {inf}"


def _emit(lines) -> None:
    if not lines:
        return
    path = config.dump_op_args_file
    if path is not None:
        with open(path, "a") as f:
            f.writelines(line + "\n" for line in lines)
        return
    if not dump_log.isEnabledFor(logging.INFO) and not dump_log.handlers:
        handler = logging.StreamHandler(sys.stderr)  # the user asked for the dump: show it
        handler.setFormatter(logging.Formatter("%(message)s"))
        dump_log.addHandler(handler)
        dump_log.setLevel(logging.INFO)
        dump_log.propagate = False
    for line in lines:
        dump_log.info("%s", line)


# ---- autocompare ----


def compare(op: str, actual: list, expected: list) -> None:
    """The native kernel calls this with its results (copied to the host) and the op's results
    on host copies of its inputs."""
    problems = []
    for i, (a, e) in enumerate(zip(_tensors(actual), _tensors(expected))):
        difference = compare_tensors(a, e, TOLERANCES)
        if not difference.close:
            problems.append(f"  result {i}: {_first_disagreement(a, e)}; {difference}")
    if not problems:
        return
    report = "\n".join([f"dicp autocompare: emu op {op} differs from the CPU", *problems])
    if config.autocompare == "raise":
        raise EagerAutocompareError(report)
    if op not in _reported:  # a training loop would repeat it every step
        _reported.add(op)
        log.warning("%s", report)


def _first_disagreement(actual: torch.Tensor, expected: torch.Tensor) -> str:
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return (
            f"emu gives {actual.dtype}{list(actual.shape)}, the CPU "
            f"{expected.dtype}{list(expected.shape)}"
        )
    rtol, atol = tolerance_for(expected.dtype, TOLERANCES)
    a, e = actual.detach().double(), expected.detach().double()
    if a.is_complex() or e.is_complex():
        a, e = torch.view_as_real(actual.detach()).double(), torch.view_as_real(expected).double()
    off = ~((a - e).abs() <= atol + rtol * e.abs()) & ~(a.isnan() & e.isnan()) & ~(a == e)
    index = [int(i) for i in off.nonzero()[0]] if off.any() else []
    element = tuple(index[: actual.dim()])
    return (
        f"first disagreeing element {list(element)}: emu {actual[element].item()!r}, "
        f"CPU {expected[element].item()!r}"
    )

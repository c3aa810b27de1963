"""The emulated device's eager ops: which run natively, and what dicp's knobs decide per call.

Three kinds of kernel serve an `emu` tensor (csrc/):
- structural ops (allocation, views, resize_, set_, copies, `.item()`): always native, they are
  the device's memory model and compute nothing; the knobs below do not apply to them;
- the native set (NATIVE_OPS): device work on the current stream;
- every other ATen op: the CPU fallback, logged once per op.

The knobs are dicp's compiler knobs, with the same names and syntax, read at every call:
- DICP_FALLBACK_OPS (patterns): a native op of the set runs on the CPU instead;
- DICP_KEEP_TORCH_DEFAULT (patterns): the device registers no kernel of its own for the op, so
  torch's default implementation is used: its decomposition where torch has one (`full` is
  `empty` + `fill_`), else the CPU implementation through the fallback. Read once, when
  `import dicp.emu` registers the kernels (as DIPU reads its list);
- DICP_AUTOCOMPARE: each native op is also run on host copies of its inputs and compared;
- DICP_INJECT_BUG_TESTING_ONLY: a native op computes a wrong value (accuracy) or raises;
- DICP_DUMP_OP_ARGS (1-3), DICP_DUMP_OP_ARGS_FILE: every compute op, native or fallback.
"""

import collections
import contextlib
import fnmatch
import functools
import logging

import torch

from dicp import config

from . import torch_compat

log = logging.getLogger("dicp.emu")

NATIVE_OPS = (
    # fill and the factories (random ones draw from the device's generator)
    "aten.fill_.Scalar",
    "aten.fill_.Tensor",
    "aten.zero_.default",
    "aten.full.default",
    "aten.zeros.default",
    "aten.ones.default",
    "aten.arange.start_out",
    "aten.normal_.default",
    "aten.uniform_.default",
    "aten.random_.default",
    "aten.random_.from",
    "aten.random_.to",
    "aten.bernoulli_.float",
    # pointwise
    "aten.add.Tensor",
    "aten.add_.Tensor",
    "aten.sub.Tensor",
    "aten.sub_.Tensor",
    "aten.mul.Tensor",
    "aten.mul_.Tensor",
    "aten.div.Tensor",
    "aten.div_.Tensor",
    "aten.neg.default",
    "aten.abs.default",
    "aten.exp.default",
    "aten.log.default",
    "aten.sqrt.default",
    "aten.rsqrt.default",
    "aten.relu.default",
    "aten.sigmoid.default",
    "aten.tanh.default",
    "aten.where.self",
    "aten.threshold_backward.default",
    "aten.maximum.default",
    "aten.minimum.default",
    # reductions
    "aten.sum.dim_IntList",
    "aten.mean.dim",
    "aten.amax.default",
    "aten.amin.default",
    "aten.max.dim",
    "aten.argmax.default",
    # library kernels
    "aten.mm.default",
    "aten.addmm.default",
    "aten.bmm.default",
)

# Ops torch implements for any backend by a composite that ends in a kernel this device lacks
# (convolution reaches convolution_overrideable, which raises): they fall back as a whole.
HOST_OPS = ("aten.convolution.default", "aten.convolution_backward.default")

# Arguments an op's CPU kernel writes though its schema does not mark them written (Tensor(a!)),
# by argument name. The fallback copies back what an op writes, and it knows that from the
# schema, so without this row batch norm's running statistics stay unchanged on the device.
# torch knows these schemas are wrong: its SchemaInfo special-cases native_batch_norm's running
# statistics (with cudnn's and miopen's, which have no CPU kernel), and torch/_decomp says
# native_batch_norm "has a wrong schema"; batch_norm_update_stats' CPU kernel updates them too.
HIDDEN_WRITES = {
    "aten.native_batch_norm.default": ("running_mean", "running_var"),
    "aten.native_batch_norm.out": ("running_mean", "running_var"),
    "aten.batch_norm_update_stats.default": ("running_mean", "running_var"),
}

# Ops whose result cannot be compared with a second run: uninitialized memory.
UNINITIALIZED = ("aten.empty.*", "aten.empty_strided.*", "aten.new_empty*", "aten.empty_like.*")

native: frozenset = frozenset()  # what registration made native (set by dicp.emu)
# ops whose own kernel is the CPU fallback, as the dispatcher names them (set by dicp.emu)
fallback_registered: frozenset = frozenset()
_logged: set = set()
_observers: list = []


def to_register() -> list:
    """NATIVE_OPS less those DICP_KEEP_TORCH_DEFAULT keeps, as the dispatcher names them."""
    keep = config.keep_torch_default
    return [_dispatcher_name(op) for op in NATIVE_OPS if not _matches(op, keep)]


def host_ops() -> list:
    return [_dispatcher_name(op) for op in HOST_OPS]


def hidden_writes() -> dict:
    """HIDDEN_WRITES as the dispatcher names the ops."""
    return {_dispatcher_name(op): list(names) for op, names in HIDDEN_WRITES.items()}


def _dispatcher_name(op: str) -> str:
    name, overload = op.removeprefix("aten.").rsplit(".", 1)
    return name if overload == "default" else f"{name}.{overload}"


def registered(names) -> frozenset:
    return frozenset(op for op in NATIVE_OPS if _dispatcher_name(op) in set(names))


def path(op: str) -> str:
    """Where ATen op `op` ("aten.cumsum.default") runs when called on emu tensors, as the
    knobs now say: "native" (a device kernel, or a structural op), "fallback" (the CPU:
    inputs copied to the host, the op run there, results copied back) or "composite" (torch's
    composite of other ops, each on its own path)."""
    if op in native:
        return "fallback" if _matches(op, config.fallback_ops) else "native"
    namespace, name, overload = op.split(".")
    if namespace == "aten" and _dispatcher_name(op) in fallback_registered:
        return "fallback"
    qualified = f"{namespace}::{name}" + ("" if overload == "default" else f".{overload}")
    if torch_compat.has_kernel(qualified, "PrivateUse1"):
        return "native"
    composite = (
        "CompositeImplicitAutograd",
        "CompositeExplicitAutograd",
        "CompositeExplicitAutogradNonFunctional",
    )
    if any(torch_compat.has_kernel(qualified, key) for key in composite):
        return "composite"
    return "fallback"  # the backend fallback serves every op without a kernel


def _matches(op: str, patterns) -> bool:
    return any(fnmatch.fnmatchcase(op, pattern) for pattern in patterns)


def policy(op: str, is_native: bool) -> tuple:
    """The kernels ask this for every compute op: (forced to the CPU, dump level, compare,
    fault: 0 none, 1 accuracy, 2 error)."""
    forced = is_native and _matches(op, config.fallback_ops)
    on_device = is_native and not forced
    _record(op, "native" if on_device else "fallback", forced)
    compare = on_device and config.autocompare != "off" and _comparable(op)
    return forced, config.dump_op_args, compare, _fault(op) if on_device else 0


def _record(op: str, path: str, forced: bool) -> None:
    for seen in _observers:
        seen[op, path] += 1
    if path == "fallback" and (op, forced) not in _logged:
        # As dicp logs compiled graphs' fallbacks: the device's own (it declares its native
        # set) at INFO, those the user forced at WARNING.
        _logged.add((op, forced))
        why = "forced by DICP_FALLBACK_OPS" if forced else "no emu kernel"
        log.log(
            logging.WARNING if forced else logging.INFO,
            "dicp.emu: %s runs on the CPU (%s): inputs copied to the host and results back",
            op,
            why,
        )


def _fault(op: str) -> int:
    spec = config.inject_bug_testing_only
    if spec is None or not _matches(op, (spec[0],)):
        return 0
    return 1 if spec[1] == "accuracy" else 2


@functools.cache
def _comparable(op: str) -> bool:
    return not _matches(op, UNINITIALIZED) and not is_random(op)


@functools.cache
def is_random(op: str) -> bool:
    """Whether ATen op `op` ("aten.bernoulli_.float") draws random numbers."""
    namespace, name, overload = op.split(".")
    overload_packet = getattr(getattr(torch.ops, namespace), name)
    return torch.Tag.nondeterministic_seeded in getattr(overload_packet, overload).tags


@contextlib.contextmanager
def observe_ops():
    """Count, in the yielded Counter, the compute ops run inside the block:
    `counts["aten.add.Tensor", "native"]`, `counts["aten.cumsum.default", "fallback"]`."""
    seen = collections.Counter()
    _observers.append(seen)
    try:
        yield seen
    finally:
        del _observers[next(i for i, o in enumerate(_observers) if o is seen)]

"""An OpInfo pass over the emulated device's eager ops, against the CPU.

For each OpInfo of torch's op_db, its first samples, in one dtype both run (float32 where the
op has it), run on the CPU and on emu: each result must come back on emu with the CPU's shape,
dtype and values; where the op is differentiable, the inputs' gradients must agree too. Random
ops (those whose ATen ops draw random numbers: the device's generator is not the CPU's) are
held to shape, dtype and device. A sample the CPU refuses is not compared, and an OpInfo with
no sample compared is skipped, never passed. Which ATen ops ran natively and which fell back is
counted per OpInfo; `python -m test.emu.opinfo` runs the whole pass and prints the report
(`python -m test.emu.opinfo --subset`: the representative subset of the default suite).
"""

import collections
import functools
import itertools
import sys
import warnings
from dataclasses import dataclass, field

import torch
from torch.utils import _pytree as pytree

from dicp.emu.eager import is_random, observe_ops
from dicp.tolerance import TOLERANCES, tolerance_for

SAMPLES = 3
DTYPES = (
    torch.float32,
    torch.float64,
    torch.int64,
    torch.int32,
    torch.bool,
    torch.uint8,
    torch.complex64,
)

# OpInfos whose results are uninitialized memory: held to shape, dtype and device.
UNINITIALIZED = {
    "empty",
    "empty_like",
    "empty_strided",
    "empty_permuted",
    "new_empty",
    "new_empty_strided",
}

# OpInfos the pass does not run, and why.
SKIPS = {
    "sparse.sampled_addmm": "sparse layouts: the emulated device holds strided tensors only",
    "sparse.mm.reduce": "sparse layouts: the emulated device holds strided tensors only",
    "to_sparse": "sparse layouts: the emulated device holds strided tensors only",
}


# The default suite's subset: each kind of kernel (native pointwise, reductions, matrix
# products, factories, random and uninitialized results), the fallback's hard cases (views of
# an input, data-dependent sizes, host index arguments, structured and composite ops, integer,
# bool and complex dtypes) and gradients through both. DICP_TEST_EMU_OPINFO=all runs every
# OpInfo instead.
SUBSET = (
    "add",
    "mul",
    "div.no_rounding_mode",
    "exp",
    "sigmoid",
    "where",
    "abs",
    "maximum",
    "nn.functional.relu",
    "sum",
    "mean",
    "amax",
    "max.reduction_with_dim",
    "argmax",
    "mm",
    "addmm",
    "bmm",
    "full",
    "zeros",
    "arange",
    "normal",
    "bernoulli",
    "randn",
    "nn.functional.dropout",
    "empty",
    "cumsum",
    "softmax",
    "nn.functional.conv2d",
    "nn.functional.layer_norm",
    "nn.functional.group_norm",
    "index_put",
    "scatter_add",
    "gather",
    "sort",
    "topk",
    "nonzero",
    "masked_select",
    "tensor_split",
    "nn.functional.embedding",
    "nn.functional.cross_entropy",
    "atan2",
    "clamp",
    "addcmul",
    "transpose",
    "diagonal",
    "unfold",
    "as_strided",
    "view_as_real",
    "expand",
    "narrow",
    "index_add",
    "bitwise_and",
    "logical_and",
    "to",
    "complex",
    "conj",
    "linalg.inv",
)


@dataclass
class Outcome:
    name: str
    status: str  # pass, fail, skip
    detail: str = ""
    samples: int = 0  # compared with the CPU
    ops: collections.Counter = field(default_factory=collections.Counter)  # (op, path) -> calls


@functools.cache
def opinfos() -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.testing._internal.common_methods_invocations import op_db
    return {_name(op): op for op in op_db}


def _name(op) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def dtype_of(op):
    supported = op.supported_dtypes("cpu")
    return next((d for d in DTYPES if d in supported), None)


def check(name: str) -> Outcome:
    """Run OpInfo `name`'s samples on emu and on the CPU."""
    op, outcome = opinfos()[name], Outcome(name, "pass")
    dtype = dtype_of(op)
    if name in SKIPS or dtype is None:
        return Outcome(name, "skip", SKIPS.get(name, "no dtype of the pass on the CPU"))
    grad = op.supports_autograd and dtype.is_floating_point
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for sample in _samples(op, dtype, grad):
            with observe_ops() as seen:
                problem = _check_sample(op, sample, grad)
            outcome.ops.update(seen)
            if problem is CPU_REFUSES:
                continue
            outcome.samples += 1
            if problem:
                return Outcome(
                    name,
                    "fail",
                    f"{problem}\n    sample: {_describe(sample)}",
                    outcome.samples,
                    outcome.ops,
                )
    if not outcome.samples:
        return Outcome(name, "skip", "no sample the CPU runs", 0, outcome.ops)
    return outcome


def _samples(op, dtype, grad):
    """The first samples, made on emu as device tests make them (the sample functions keep
    the tensors an op wants on the host, such as tensor_split's indices, on the host)."""
    torch.manual_seed(0)
    return itertools.islice(op.sample_inputs("emu", dtype, requires_grad=grad), SAMPLES)


CPU_REFUSES = "the CPU refuses the sample"  # nothing to compare with


def _check_sample(op, sample, grad):
    """None if emu agrees with the CPU, else what differs (or CPU_REFUSES)."""
    emu_args = (sample.input, sample.args, sample.kwargs)
    cpu_args = _to_cpu(emu_args)
    try:
        expected = _run(op, cpu_args, seed=0)
    except Exception:
        return CPU_REFUSES
    try:
        with observe_ops() as seen:
            actual = _run(op, emu_args, seed=0)
    except Exception as error:
        return f"emu raised {type(error).__name__}: {_first_line(error)}"
    random = any(is_random(name) for name, _ in seen) or op.name in UNINITIALIZED
    problem = _compare(actual, expected, "output", values=not random)
    if problem or not grad or random:
        return problem
    return _compare_grads(sample, cpu_args, emu_args, expected, actual)


def _run(op, args, seed):
    torch.manual_seed(seed)
    inp, positional, keywords = args
    return op(inp, *positional, **keywords)


def _to_cpu(value):
    """The sample on the host: emu tensors copied with their whole storage (a view keeps its
    strides and offset), host tensors cloned, emu devices as the CPU; a tensor used twice is
    copied once."""
    made = {}

    def move(leaf):
        if isinstance(leaf, torch.Tensor):
            if id(leaf) not in made:
                made[id(leaf)] = _host_copy(leaf)
            return made[id(leaf)]
        return "cpu" if _is_emu_device(leaf) else leaf

    return pytree.tree_map(move, value)


def _is_emu_device(leaf) -> bool:
    if isinstance(leaf, torch.device):
        return leaf.type == "emu"
    return isinstance(leaf, str) and leaf.split(":")[0] == "emu"


def _host_copy(t):
    if t.device.type != "emu" or t.layout != torch.strided:
        copy = t.detach().clone()
    else:
        whole = torch.empty(0, dtype=t.dtype, device="emu").set_(
            t.untyped_storage(), 0, (t.untyped_storage().nbytes() // t.element_size(),), (1,)
        )
        copy = whole.cpu().as_strided(t.shape, t.stride(), t.storage_offset())
    return copy.requires_grad_() if t.requires_grad else copy


def _compare(actual, expected, what, values=True, device="emu"):
    got, want = pytree.tree_leaves(actual), pytree.tree_leaves(expected)
    if len(got) != len(want):
        return f"{what}: {len(got)} results where the CPU gives {len(want)}"
    for i, (a, e) in enumerate(zip(got, want)):
        label = f"{what} {i}"
        if not isinstance(e, torch.Tensor):
            if not _same_scalar(a, e) and values:
                return f"{label}: {a!r} where the CPU gives {e!r}"
            continue
        if not isinstance(a, torch.Tensor) or a.device.type != device:
            return f"{label}: {type(a).__name__} on {getattr(a, 'device', '-')}, not on {device}"
        if (a.shape, a.dtype) != (e.shape, e.dtype):
            return f"{label}: {a.dtype}{list(a.shape)} where the CPU gives {e.dtype}{list(e.shape)}"
        if values and not _close(a.detach().cpu(), e.detach()):
            return f"{label}: values differ (max diff {_max_diff(a.detach().cpu(), e)})"
    return None


def _close(a, e) -> bool:
    rtol, atol = tolerance_for(e.dtype, TOLERANCES)
    if a.layout != torch.strided or e.layout != torch.strided:
        a, e = a.to_dense(), e.to_dense()
    return (
        torch.allclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
        if (a.is_floating_point() or a.is_complex())
        else torch.equal(a, e)
    )


def _max_diff(a, e):
    try:
        return (a.double() - e.double()).abs().nan_to_num().max().item()
    except Exception:
        return "?"


def _same_scalar(a, e) -> bool:
    if isinstance(e, float) and isinstance(a, float) and e != e:
        return a != a
    return a == e


def _compare_grads(sample, cpu_args, emu_args, expected, actual):
    cpu_inputs = [
        t for t in pytree.tree_leaves(cpu_args) if isinstance(t, torch.Tensor) and t.requires_grad
    ]
    emu_inputs = [
        t for t in pytree.tree_leaves(emu_args) if isinstance(t, torch.Tensor) and t.requires_grad
    ]
    process = sample.output_process_fn_grad or (lambda x: x)
    cpu_outs, emu_outs = _differentiable(process(expected)), _differentiable(process(actual))
    if not cpu_inputs or not cpu_outs or len(cpu_outs) != len(emu_outs):
        return None
    torch.manual_seed(0)
    cotangents = [torch.randn_like(t) for t in cpu_outs]
    try:
        want = torch.autograd.grad(cpu_outs, cpu_inputs, cotangents, allow_unused=True)
    except Exception:
        return None  # no CPU backward for this sample
    try:
        got = torch.autograd.grad(
            emu_outs, emu_inputs, [c.to("emu") for c in cotangents], allow_unused=True
        )
    except Exception as error:
        return f"emu backward raised {type(error).__name__}: {_first_line(error)}"
    pairs = [(g, w) for g, w in zip(got, want) if w is not None]
    if any(g is None for g, _ in pairs):
        return "gradient: none on emu where the CPU has one"
    return _compare([g for g, _ in pairs], [w for _, w in pairs], "gradient")


def _differentiable(outputs):
    return [
        t
        for t in pytree.tree_leaves(outputs)
        if isinstance(t, torch.Tensor)
        and t.requires_grad
        and (t.is_floating_point() or t.is_complex())
    ]


def _first_line(error) -> str:
    lines = str(error).strip().splitlines()
    return lines[0][:300] if lines else ""


def _describe(sample) -> str:
    def brief(value):
        if isinstance(value, torch.Tensor):
            return f"{str(value.dtype).removeprefix('torch.')}{list(value.shape)}"
        return repr(value)[:40]

    args = [brief(sample.input)] + [brief(a) for a in sample.args]
    args += [f"{k}={brief(v)}" for k, v in sample.kwargs.items()]
    return ", ".join(args)


def report(outcomes) -> str:
    """Totals: OpInfos passed, failed, skipped; ATen op calls and distinct ops native and
    fallen back; OpInfos whose every compute op ran natively."""
    status = collections.Counter(o.status for o in outcomes)
    calls = collections.Counter()
    ops = collections.defaultdict(set)
    for outcome in outcomes:
        for (op, path), count in outcome.ops.items():
            calls[path] += count
            ops[path].add(op)
    all_native = sum(1 for o in outcomes if o.ops and all(p == "native" for _, p in o.ops))
    lines = [
        f"OpInfo pass on emu: {len(outcomes)} OpInfos, {status['pass']} pass, "
        f"{status['fail']} fail, {status['skip']} skipped; "
        f"{sum(o.samples for o in outcomes)} samples",
        f"ATen op calls: {calls['native']} native, {calls['fallback']} fell back to the CPU",
        f"distinct ATen ops: {len(ops['native'])} native, {len(ops['fallback'])} fell back",
        f"OpInfos that ran natively only: {all_native}; with a fallback: "
        f"{sum(1 for o in outcomes if any(p == 'fallback' for _, p in o.ops))}",
    ]
    lines += [f"SKIP {o.name}: {o.detail}" for o in outcomes if o.status == "skip"]
    lines += [f"FAIL {o.name}: {o.detail}" for o in outcomes if o.status == "fail"]
    return "\n".join(lines)


def main(args) -> int:
    names = list(SUBSET) if args == ["--subset"] else args or list(opinfos())
    outcomes = [check(name) for name in names]
    print(report(outcomes))
    return 1 if any(o.status == "fail" for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

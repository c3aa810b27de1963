"""torch's own nn.Module samples (the ModuleInfo database torch tests itself with) through a
dicp backend, against eager: for every sample, in training and eval mode, the outputs, the
gradients of the inputs and parameters, and the buffers after the call (BatchNorm's running
statistics). A value outside dicp/tolerance.py's table of eager's is judged, as the fuzzer
judges it, against the same module run in float64: it passes if it is as accurate as eager.

    python test/scripts/module_db.py                          # every module, static
    python test/scripts/module_db.py --dynamic nn.Conv2d nn.CrossEntropyLoss
    python test/scripts/module_db.py --backend emugraph      # on emu, against eager on the host

One line per problem, a summary at the end; the exit status is 1 if any compiled result
differs from eager or any compile fails, apart from KNOWN_TORCH_FAILURES. Lazy modules and
FractionalMaxPool (random samples) are left out. About 15 minutes static on 2 cores;
dynamic takes over 45.
"""

import argparse
import copy
import functools
import sys
import warnings
from pathlib import Path

import torch
from torch.testing._internal.common_modules import module_db

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from dicp.bridge.pipeline.torch_compat import pytree
from dicp.tools.fuzz.check import float64_inputs, judge
from test.common.utils import OnDevice, device_of

SKIPPED = ("nn.Lazy", "nn.FractionalMaxPool")
# Differences that every backend shows, torch's and dicp's alike (aot_eager included):
# torch's decomposition of multilabel_margin_loss_forward, registered on the Autograd key so
# no backend's table replaces it, returns shape (1,) for one unbatched sample where eager
# returns a 0-d loss.
KNOWN_TORCH_FAILURES = {("nn.MultiLabelMarginLoss", "1d_reduction_none")}


def tensors(value):
    """The tensors in `value` (nested lists, tuples, dicts and named tuples), in order."""
    return [t for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]


def fresh(value):
    """A copy of `value` whose tensors are new leaves, gradients tracked as in the original."""
    return pytree.tree_map_only(
        torch.Tensor, lambda t: t.detach().clone().requires_grad_(t.requires_grad), value
    )


def in_float64(value):
    """`value` with its tensors as the fuzzer's arbiter takes them (float64_inputs)."""
    return pytree.tree_map_only(torch.Tensor, lambda t: float64_inputs([t])[0], value)


def call(module, forward, args, kwargs):
    """Outputs, gradients (through a fixed random weighting of the float outputs) and
    buffers of one call of `forward` (module itself, or compiled) on `args` and `kwargs`."""
    args, kwargs = fresh(args), fresh(kwargs)
    outputs = tensors(forward(*args, **kwargs))
    # drawn in float32 whatever the output's type, so the float64 run weighs by the same values
    weighted = [
        (out, torch.randn(out.shape, generator=torch.Generator().manual_seed(i)).to(out.dtype))
        for i, out in enumerate(outputs)
        if out.requires_grad and out.is_floating_point()
    ]
    leaves = [t for t in tensors((args, kwargs)) if t.requires_grad]
    leaves += [p for p in module.parameters() if p.requires_grad]
    grads = []
    if weighted and leaves:
        grads = list(
            torch.autograd.grad(
                [o for o, _ in weighted], leaves, [w for _, w in weighted], allow_unused=True
            )
        )
    return {"output": outputs, "gradient": grads, "buffer": [b.clone() for b in module.buffers()]}


def float64_run(module, sample):
    """A callable giving `call`'s results for a float64 copy of `module` (taken now, before
    eager's call updates its buffers) on float64 copies of the sample; None if it fails."""
    twin = copy.deepcopy(module).double()

    @functools.cache
    def run():
        try:
            return call(
                twin,
                twin,
                in_float64(sample.forward_input.args),
                in_float64(sample.forward_input.kwargs),
            )
        except Exception:
            return None

    return run


def differences(actual, expected, reference):
    """One line per compiled value that is missing, or outside the tolerance table of eager's
    and less accurate than eager against `reference()`, the float64 run."""
    found = []
    for what, values in expected.items():
        if len(actual[what]) != len(values):
            found.append(f"{len(actual[what])} {what}s where eager gives {len(values)}")
            continue
        for i, (a, e) in enumerate(zip(actual[what], values)):
            if a is None or e is None:
                if (a is None) != (e is None):
                    found.append(f"{what} {i}: one of compiled and eager is None")
                continue
            mismatch = judge(a, e, lambda what=what, i=i: _float64_value(reference, what, i))
            if mismatch is not None:
                found.append(f"{what} {i}: {mismatch}")
    return found


def _float64_value(reference, what, i):
    results = reference()
    return None if results is None or len(results[what]) <= i else results[what][i]


def check(info, sample, training, backend, dynamic):
    """Problems of one sample: a compile failure or the differences; None if eager itself
    cannot run it."""
    torch.manual_seed(0)
    try:
        module = info.module_cls(
            *sample.constructor_input.args, **sample.constructor_input.kwargs
        ).train(training)
        twin, reference = copy.deepcopy(module), float64_run(module, sample)
        inputs = sample.forward_input.args, sample.forward_input.kwargs
        expected = call(module, module, *inputs)
    except Exception:
        return None
    torch._dynamo.reset()
    try:
        compiled = torch.compile(twin, backend=backend, dynamic=dynamic)
        device = device_of(backend)  # a device backend's module and inputs go there
        actual = call(
            twin, compiled if device == "cpu" else OnDevice(compiled, twin, device), *inputs
        )
    except Exception as error:
        return [f"compile or run failed: {type(error).__name__}: {str(error)[:300]}"]
    return differences(actual, expected, reference)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help="ModuleInfo names (default: all)")
    parser.add_argument("--backend", default="new_backendgraph")
    parser.add_argument("--dynamic", action="store_true")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    # loads the backend, and a device backend's runtime, before eager's first backward:
    # autograd's engine sizes its per-device queues once, from the devices registered by then
    device_of(args.backend)
    checked, failed = 0, 0
    for info in module_db:
        if info.name.startswith(SKIPPED) or (args.modules and info.name not in args.modules):
            continue
        for training in (True, False):
            torch.manual_seed(0)  # a module's samples do not depend on the modules before it
            samples = info.module_inputs_func(
                info, device="cpu", dtype=torch.float32, requires_grad=True, training=training
            )
            for sample in samples:
                problems = sample.forward_input and check(
                    info, sample, training, args.backend, args.dynamic
                )
                if problems is None:
                    continue
                checked += 1
                known = (info.name, sample.desc) in KNOWN_TORCH_FAILURES
                failed += bool(problems) and not known
                for problem in problems:
                    mode = "train" if training else "eval"
                    print(
                        f"{info.name} [{mode}, {sample.desc or 'sample'}]"
                        f"{' (known torch failure)' if known else ''}: {problem}",
                        flush=True,
                    )
    print(f"{checked} samples checked, {failed} with problems")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

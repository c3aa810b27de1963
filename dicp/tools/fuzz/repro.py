"""A failing case as a standalone Python script: imports, the program, inputs built from
their seeds, the compiled call and the comparison with eager. It exits 1 while the bug is
there (an error propagates), 0 once it is fixed."""

import inspect

from . import inputs as inputs_module
from .program import batch_source

HEADER = """\
# dicp fuzzer repro: {title}
# {failure}
import os
import sys

os.environ.setdefault("DICP_BOUNDS_CHECK", "1")  # an out-of-bounds access raises BoundsError

import torch
import torch.nn.functional as F

from dicp.tools.fuzz.check import float64_inputs, float64_reference_runs, judge, rounded_run
from dicp.tools.fuzz.ties import tie_affected
from dicp.tools.on_device import backend_device, on_device

"""

FOOTER = '''
# (program seed, output index in its program) of each output: seeds its gradient weight
WEIGHT_SEEDS = {weight_seeds}
# the float dtype whose tolerance each output gets: the least precise one it is computed from
OUTPUT_TOLERANCE = {output_dtypes}
GRADIENT_TOLERANCE = {grad_dtypes}


def inputs(config):
    return [
{inputs}
    ]


def gradients(outputs, inputs, config, eager_outputs):
    """Gradients of the float outputs through sum(output * fixed random weight), the weight
    rounded to eager's output dtype."""
    pairs = []
    for (seed, i), out, like in zip(WEIGHT_SEEDS, outputs, eager_outputs, strict=True):
        if out.requires_grad:
            g = torch.Generator().manual_seed(seed * 31 + i * 7 + config)
            weight = torch.randn(out.shape, generator=g, dtype=torch.float64).to(like.dtype)
            pairs.append((out, weight.to(out.dtype)))
    leaves = [t for t in inputs if t.requires_grad]
    if not pairs or not leaves:
        return [None] * len(leaves)
    return torch.autograd.grad([o for o, _ in pairs], leaves, [w for _, w in pairs],
                               allow_unused=True)


def float64_run(eager_inputs, expected, config):
    """The batch in float64: the arbiter where fused float arithmetic is closer to exact than
    eager (as written, else with its half types in float64). None where neither can run."""
    for context in float64_reference_runs():
        inputs64 = float64_inputs(eager_inputs)
        try:
            with context():
                outputs = batch(*inputs64)
                return outputs, gradients(outputs, inputs64, config, expected)
        except RuntimeError:
            continue
    return [None] * len(expected), None


compiled = on_device(torch.compile(batch, backend={backend!r}, dynamic={dynamic}, fullgraph=True),
                     backend_device({backend!r}))  # a device backend's inputs go there
failed = False
for config in range({configs}):
    # after the first size, a recompile raises: one build must serve every size
    torch._dynamo.config.error_on_recompile = config > 0
    eager_inputs, compiled_inputs = inputs(config), inputs(config)
    expected, actual = batch(*eager_inputs), compiled(*compiled_inputs)
    reference, reference_grads = float64_run(eager_inputs, expected, config)
    rounded = rounded_run(batch, inputs(config)) or [None] * len(expected)
    pairs = [(f"output {{i}}", a, e, r, d, o, None) for i, (a, e, r, d, o) in
             enumerate(zip(actual, expected, reference, OUTPUT_TOLERANCE, rounded, strict=True))]
    if {backward}:
        names = [n for n, t in zip({names}, eager_inputs) if t.requires_grad]
        # elements whose gradient flows through a sort's near tie are not defined
        ties = tie_affected(batch, inputs(config))
        pairs += [(f"gradient of {{n}}", a, e, r, GRADIENT_TOLERANCE[n], None, t)
                  for n, a, e, r, t in zip(
            names, gradients(actual, compiled_inputs, config, expected),
            gradients(expected, eager_inputs, config, expected),
            reference_grads or [None] * len(names), ties)]
    for what, a, e, r, tolerance, o, t in pairs:
        mismatch = judge(a, e, r, tolerance, o, ties=t)
        if mismatch:
            failed = True
            print(f"config {{config}}, {{what}}: {{mismatch}}")
print("FAIL" if failed else "OK: compiled matches eager")
sys.exit(1 if failed else 0)
'''


def render(case, failure, title=""):
    """The repro script of `case` (a runner.Case) failing with `failure`."""
    weight_seeds = [(p.seed, i) for p in case.programs for i in range(len(p.outputs))]
    output_dtypes, grad_dtypes = [], {}
    for p in case.programs:
        outputs, grads = p.tolerance_dtypes(p.run(p.build_inputs(0)))
        output_dtypes += outputs
        grad_dtypes.update({i.name: grads for i in p.inputs})
    builders = [f"        {i.call_source(case.configs)}," for p in case.programs for i in p.inputs]
    names = [i.name for p in case.programs for i in p.inputs]
    return (
        HEADER.format(title=title or _title(case), failure=_one_line(failure))
        + inspect.getsource(inputs_module.make_tensor)
        + "\n\n"
        + batch_source(case.programs)
        + FOOTER.format(
            inputs="\n".join(builders),
            weight_seeds=weight_seeds,
            output_dtypes=output_dtypes,
            grad_dtypes=grad_dtypes,
            backend=case.backend,
            dynamic=case.dynamic,
            configs=case.configs,
            backward=case.backward,
            names=names,
        )
    )


def _title(case):
    shapes = "dynamic shapes" if case.dynamic else "static shapes"
    parts = ", ".join(f"{p.name} (seed {p.seed})" for p in case.programs)
    return f"{parts}; {shapes}{', backward' if case.backward else ''}"


def _one_line(failure):
    return " ".join(str(failure).split())[:300]

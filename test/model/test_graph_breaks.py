"""A model with a print and a data-dependent Python branch: dynamo splits it into several graphs
around the break, the result agrees with eager on both branches, and recompiles stay bounded.

float32. Graphs are counted with a wrapper backend around `--backend`. Static runs keep one
input shape; dynamic runs change the batch size at every call.
"""

import pytest

from ..common.utils import (
    MODEL_TOLERANCES,
    Size,
    assert_close,
    compile_model,
    dynamo,
    parse_args,
    torch,
    update_dynamo_config,
)
from .helpers import compile_modes
from .models.mlp import build_branchy_mlp

args = parse_args()
DIM = 32
# (batch, sign of fc1's output sum) per call: positive, negative, positive.
CALLS = Size([(4, 1), (4, -1), (4, 1)], [(2, 1), (3, -1), (4, 1)])
# One graph before the print, one from the print to the branch, one per branch taken.
MAX_GRAPHS = 4


class CountingBackend:
    """Calls the backend under test and counts the FX graphs dynamo hands it."""

    def __init__(self, backend):
        self.inner = dynamo.lookup_backend(backend)
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return self.inner(gm, example_inputs)


def make_input(model, batch, sign, seed):
    """An input whose fc1 output sums to a number of the given sign, far from zero."""
    g = torch.Generator().manual_seed(seed)
    direction = model.fc1.weight.sum(dim=0)
    x = torch.randn(batch, DIM, generator=g) * 0.1 + sign * 3.0 * direction / direction.norm()
    with torch.no_grad():
        assert (model.fc1(x).sum() > 0) == (sign > 0), "input does not take the intended branch"
    return x


class TestGraphBreaks:
    @pytest.mark.parametrize("dynamic", compile_modes(args))
    def test_branch_and_print(self, dynamic):
        model = build_branchy_mlp(dim=DIM)
        backend = CountingBackend(args.backend)
        (compiled,) = compile_model(model, backend, dynamic)
        dynamo.reset()
        update_dynamo_config(dynamic)
        # A runaway recompile fails loudly here instead of silently falling back to eager.
        with dynamo.config.patch(recompile_limit=MAX_GRAPHS, fail_on_recompile_limit_hit=True):
            for i, (batch, sign) in enumerate(CALLS.dynamic if dynamic else CALLS.static):
                x = make_input(model, batch, sign, seed=i)
                with torch.no_grad():
                    assert_close(compiled.model(x), model(x), table=MODEL_TOLERANCES)
        # More than one graph shows dynamo split the function instead of giving up on it.
        assert 2 <= backend.graphs <= MAX_GRAPHS, f"{backend.graphs} graphs for {i + 1} calls"

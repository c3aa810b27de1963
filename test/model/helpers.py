"""Helpers shared by the model suites: modes, compile counting and result comparison."""

import copy

import pytest
import torch
from torch._dynamo.utils import counters

from ..common.utils import (
    MODEL_TOLERANCES,
    assert_close,
    assert_close_or_as_accurate,
    compile_model,
    dicp_backend,
)
from ..common.tolerance import tolerance_for

HALF_DTYPES = (torch.float16, torch.bfloat16)


def float64_twin(model):
    """A copy of `model` computing in float64 from the same (possibly rounded) weights."""
    return copy.deepcopy(model).double()


def compile_modes(args):
    """pytest params for the requested modes: static, dynamic or both (the harness default)."""
    modes = [False, True] if args.dynamic is None else [args.dynamic]
    return [pytest.param(m, id="dynamic" if m else "static") for m in modes]


def compile_one(model, args, dynamic):
    """The harness's compiled model for a single mode."""
    (compiled,) = compile_model(model, args.backend, dynamic)
    return compiled.model


def graphs_compiled():
    """FX graphs dynamo has handed to a backend so far in this process."""
    return counters["stats"]["unique_graphs"]


def is_dicp_backend(backend):
    """A backend registered with dicp (any vendor's), as opposed to inductor or aot_eager."""
    return dicp_backend(backend) is not None


def dicp_builds(backend):
    """Builds by dicp's compile cache so far in this process when testing a dicp backend,
    else None."""
    if not is_dicp_backend(backend):
        return None
    from dicp.bridge.cache.build import cache_stats

    return cache_stats()["builds"]


def assert_reused(backend, graphs_before, builds_before):
    """After the first compile of a dynamic model, new sizes must reuse what was compiled."""
    assert graphs_compiled() == graphs_before, (
        f"dynamo recompiled for a new size: {graphs_compiled() - graphs_before} new graph(s)"
    )
    if is_dicp_backend(backend):
        # A dynamic-shape graph is built once and serves every size, so a new size must not
        # build again. This is a property of dicp backends, checked only there.
        builds = dicp_builds(backend)
        assert builds == builds_before, f"{builds - builds_before} rebuild(s) for a new size"


def assert_state_close(actual_module, expected_module, dtype=None):
    """Every parameter and buffer (BatchNorm running stats included) agrees with eager."""
    actual = dict(actual_module.state_dict())
    expected = dict(expected_module.state_dict())
    assert actual.keys() == expected.keys()
    for name, value in expected.items():
        try:
            assert_close(actual[name], value, table=MODEL_TOLERANCES, dtype=dtype)
        except AssertionError as err:
            raise AssertionError(f"{name}: {err}") from None


def assert_same_generation(tokens, logits, eager_tokens, eager_logits, reference_logits=None):
    """Greedy tokens equal eager's, and each step's logits agree within MODEL_TOLERANCES (or,
    given float64 `reference_logits` along eager's tokens, are about as accurate as eager's).

    The only divergence accepted is a near-tie: at the first step where the tokens differ,
    eager's logits for both choices must be within the tolerance of each other (the compiled
    logits at that step are checked too). Later steps then have different prefixes and are not
    compared.
    """
    differs = (tokens != eager_tokens).any(dim=0).nonzero()
    steps = eager_tokens.shape[1] if differs.numel() == 0 else differs[0].item() + 1
    if reference_logits is None:
        assert_close(logits[:steps], eager_logits[:steps], table=MODEL_TOLERANCES)
    else:
        assert_close_or_as_accurate(logits[:steps], eager_logits[:steps], reference_logits[:steps])
    if differs.numel() == 0:
        return
    step = steps - 1
    rtol, atol = tolerance_for(eager_logits.dtype, MODEL_TOLERANCES)
    for row in (tokens[:, step] != eager_tokens[:, step]).nonzero().flatten().tolist():
        best = eager_logits[step, row, eager_tokens[row, step]].double()
        chosen = eager_logits[step, row, tokens[row, step]].double()
        assert best - chosen <= atol + rtol * best.abs(), (
            f"token {step} of row {row}: compiled chose {tokens[row, step].item()}, eager "
            f"{eager_tokens[row, step].item()}; eager logit gap {(best - chosen).item():.3e} "
            f"is not a near-tie"
        )


def mode_dtype_params(args, static_dtypes, dynamic_dtypes):
    """pytest params (dynamic, dtype) for the requested modes, each mode with its own dtypes.

    Dynamic compiles cost about three times a static one, so the suites run the extra dtypes
    (bfloat16) statically only: symbolic sizes are handled the same way for every dtype.
    """
    dtypes = {False: static_dtypes, True: dynamic_dtypes}
    modes = [False, True] if args.dynamic is None else [args.dynamic]
    return [
        pytest.param(m, d, id=f"{'dynamic' if m else 'static'}-{str(d).split('.')[-1]}")
        for m in modes
        for d in dtypes[m]
    ]

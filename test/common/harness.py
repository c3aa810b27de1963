"""The harness plugin: seeded inputs, readable test ids, and native, exact op tests.

Registered once by `pytest_addoption` in test/common/conftest.py, whichever conftest imports it
first (ours, or a DICP op folder's), so it covers every folder below test/ and a DICP folder run
on its own.

- Every test starts from a seed made of `--seed-base` and the test's id (module, class, name
  and parameters), so a failure reproduces with the same command, and another base draws other
  inputs everywhere. Tests needing the number itself take the `seed` fixture.
- Parameters print as `static`/`dynamic` and dtype names instead of `compiled_model0`/`dtype0`.
- An op test (one taking a `compiled_model`, DICP's format) runs with DICP_STRICT=1; its
  module's eager `model` is called through a recorder (test/common/accuracy.py) so comparisons
  can consult a float64 run; and it fails if its graphs fell back to eager on any op the backend
  does not declare in `Backend.expected_fallbacks`, even when DICP_FALLBACK_OPS forced it.
  `--allow-fallback` measures a backend with fallback instead: DICP_STRICT=0, no such failure.
  Either way each fallback is a report property of the test (`eager_fallback`).
"""

import contextlib
import hashlib
import os
import random
import warnings

import pytest
import torch

from dicp.bridge.pipeline.fallback import declared_reason, observe_fallbacks

from .accuracy import recording_eager_calls
from .utils import CompiledModel, dicp_backend


def pytest_configure(config):
    # Test modules read the options at import (DICP's harness API, parse_args); pytest-xdist
    # workers do not get them in argv but inherit the environment.
    os.environ["DICP_TEST_BACKEND"] = config.getoption("--backend")
    os.environ["DICP_TEST_DYNAMIC"] = str(config.getoption("--dynamic"))


def pytest_make_parametrize_id(config, val, argname):
    if isinstance(val, CompiledModel):
        return repr(val)
    if isinstance(val, torch.dtype):
        return str(val).removeprefix("torch.")
    return None


# ---- seeds ------------------------------------------------------------------------------------


def seed_key(item):
    """The test's identity, independent of the folder pytest was started from."""
    module = getattr(getattr(item, "module", None), "__name__", None)
    if module is None:
        return item.nodeid
    return "::".join([module] + item.nodeid.split("::")[1:])


def seed_of(item):
    base = item.config.getoption("--seed-base")
    digest = hashlib.sha256(f"{base}/{seed_key(item)}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


@pytest.fixture
def seed(request):
    """This test's seed (what the global generators were seeded with)."""
    return seed_of(request.node)


@pytest.fixture(autouse=True)
def _seeded_generators(request):
    value = seed_of(request.node)
    torch.manual_seed(value)
    random.seed(value)
    with contextlib.suppress(ImportError):
        import numpy

        numpy.random.seed(value)


@pytest.fixture(autouse=True)
def _dynamo_config_restored():
    # op modules set dynamo's shape config at import and in tests (update_dynamo_config), and
    # tests patch it: each test ends with the config it started with, so a test
    # does not pass or fail by what ran before it on its worker (a static test compiled with
    # dynamic shapes after an op test set assume_static_by_default=False)
    config = torch._dynamo.config
    with _deprecations_quiet():
        saved = config.get_config_copy()
    yield
    with _deprecations_quiet():
        for key, value in saved.items():
            if getattr(config, key) != value:
                setattr(config, key, value)


@contextlib.contextmanager
def _deprecations_quiet():
    with warnings.catch_warnings():  # reading or setting a deprecated dynamo key warns
        warnings.simplefilter("ignore", FutureWarning)
        yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed and call.when == "call":
        base = item.config.getoption("--seed-base")
        report.sections.append(
            (
                "dicp harness",
                f"inputs drawn with seed {seed_of(item)} "
                f"(--seed-base {base}, key {seed_key(item)})",
            )
        )
    return report


# ---- op tests ---------------------------------------------------------------------------------


def is_op_test(item):
    return isinstance(getattr(item, "funcargs", {}).get("compiled_model"), CompiledModel)


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: covers folder conftests' reruns
def pytest_pyfunc_call(pyfuncitem):
    if not is_op_test(pyfuncitem):
        return (yield)
    backend = dicp_backend(pyfuncitem.config.getoption("--backend"))
    allow_fallback = pyfuncitem.config.getoption("--allow-fallback")
    with contextlib.ExitStack() as stack:
        patch = stack.enter_context(pytest.MonkeyPatch.context())
        patch.setenv("DICP_STRICT", "0" if allow_fallback else "1")
        model = getattr(pyfuncitem.module, "model", None)
        if isinstance(model, torch.nn.Module):
            patch.setattr(
                pyfuncitem.module, "model", stack.enter_context(recording_eager_calls(model))
            )
        fallbacks = stack.enter_context(observe_fallbacks())
        try:
            result = yield
        finally:
            record_fallbacks(pyfuncitem, backend, fallbacks)
    if backend is not None and not allow_fallback:
        assert_only_declared(backend, fallbacks)
    return result


def record_fallbacks(item, backend, fallbacks):
    """Each op the test's graphs ran as eager fallback, as a report property (`--junitxml`
    with junit_family=xunit1 writes them), marked declared or not."""
    for op, reason, dtype in sorted({(f.op, f.reason, f.dtype) for f in fallbacks}):
        declared = backend is not None and declared_reason(backend, op, dtype) is not None
        item.user_properties.append(
            ("eager_fallback", f"{op} ({reason}{'; declared' if declared else ''})")
        )


def assert_only_declared(backend, fallbacks):
    """An op test passes only if its op ran natively: no fallback the backend did not declare."""
    undeclared = sorted(
        {
            f"{f.op} ({f.reason})"
            for f in fallbacks
            if declared_reason(backend, f.op, f.dtype) is None
        }
    )
    if undeclared:
        pytest.fail(
            f"{backend.name} ran {', '.join(undeclared)} as eager fallback, and does "
            f"not declare it in Backend.expected_fallbacks: an op test passes only when "
            f"its graph runs natively (convert the op, or declare the fallback with its "
            f"reason)",
            pytrace=False,
        )

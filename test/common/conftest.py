"""DICP's conftest API: `pytest_addoption` and the `backend`/`dynamic` fixtures.

Each test folder's conftest imports these (DICP's op folders: `from ..common.conftest import
pytest_addoption, backend, dynamic`), and pytest calls every conftest's `pytest_addoption`. The
first call registers the options and the harness plugin (test/common/harness.py); later calls
find the plugin registered and add nothing, since pytest refuses an option added twice. So a
DICP folder runs next to ours (test/conftest.py imports the same function) or on its own.
"""

import pytest

from . import cold_warm, harness, tiers
from .utils import DEFAULT_BACKEND, parse_dynamic_arg

HARNESS_PLUGIN = "dicp-test-harness"


def pytest_addoption(parser, pluginmanager):
    if pluginmanager.has_plugin(HARNESS_PLUGIN):
        return
    pluginmanager.register(harness, HARNESS_PLUGIN)
    pluginmanager.register(cold_warm, "dicp-cold-warm")
    pluginmanager.register(tiers, "dicp-tiers")
    parser.addoption(
        "--backend",
        type=str,
        default=DEFAULT_BACKEND,
        help="dynamo backend to test (default: %(default)s)",
    )
    parser.addoption(
        "--dynamic",
        type=str,
        default="all",
        help="false: static shapes, true: dynamic shapes, all: both (default)",
    )
    parser.addoption(
        "--allow-fallback",
        action="store_true",
        help="op tests run with DICP_STRICT=0 and pass with eager fallback on any "
        "op (measuring a backend's coverage); by default they fail on a "
        "fallback the backend does not declare",
    )
    parser.addoption(
        "--cold-warm",
        action="store_true",
        help="run each test twice in a fresh interpreter, cold (empty cache) then "
        "warm, and require the warm run's compiled results to equal the cold "
        "run's bit for bit (test/common/cold_warm.py)",
    )
    parser.addoption(
        "--with-slow",
        action="store_true",
        help="run the slow tier too (test/common/tiers.py); without it and without -m, "
        "the slow tier is deselected",
    )
    parser.addoption(
        "--seed-base",
        type=int,
        default=0,
        help="every test seeds its inputs from this and its own id; another value "
        "draws other inputs in every test (default: %(default)s)",
    )


@pytest.fixture(scope="session")
def backend(request):
    return request.config.getoption("--backend")


@pytest.fixture(scope="session")
def dynamic(request):
    return parse_dynamic_arg(request.config.getoption("--dynamic"))

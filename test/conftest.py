import os

from .common.conftest import add_dicp_options, backend, dynamic  # noqa: F401


def pytest_addoption(parser):
    add_dicp_options(parser)


def pytest_configure(config):
    # Test modules read the options at import (DICP's harness API); xdist workers inherit these.
    os.environ["DICP_TEST_BACKEND"] = config.getoption("--backend")
    os.environ["DICP_TEST_DYNAMIC"] = str(config.getoption("--dynamic"))

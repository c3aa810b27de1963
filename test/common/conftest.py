"""Shared pytest options and fixtures; test/conftest.py registers them once for every folder."""
import pytest

from .utils import DEFAULT_BACKEND, parse_dynamic_arg


def add_dicp_options(parser):
    parser.addoption("--backend", type=str, default=DEFAULT_BACKEND,
                     help="dynamo backend to test (default: %(default)s)")
    parser.addoption("--dynamic", type=str, default="all",
                     help="false: static shapes, true: dynamic shapes, all: both (default)")


@pytest.fixture
def backend(request):
    return request.config.getoption("--backend")


@pytest.fixture
def dynamic(request):
    return parse_dynamic_arg(request.config.getoption("--dynamic"))

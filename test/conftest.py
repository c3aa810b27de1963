from .common.conftest import add_dicp_options, backend, dynamic  # noqa: F401


def pytest_addoption(parser):
    add_dicp_options(parser)

# DICP's harness API, shared with every folder below (test/common/conftest.py): the options, the
# fixtures, and the harness plugin (seeds, strict op tests, float64 references).
from .common.conftest import backend, dynamic, pytest_addoption  # noqa: F401

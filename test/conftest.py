# DICP's harness API, shared with every folder below (test/common/conftest.py): the options, the
# fixtures, and the harness plugin (seeds, strict op tests, float64 references).
import os

# Set before torch loads OpenMP, and inherited by pytest-xdist's workers and every subprocess:
# with a worker per core, each running OpenMP threads, a thread that spins while it waits
# (OpenMP's default) takes the core another worker needs. Waiting threads sleep instead; no
# result changes. The 128 indexed-write unit tests on 2 workers: 116-118 s -> 109-110 s. Set
# it in the environment to choose otherwise.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .common.conftest import backend, dynamic, pytest_addoption  # noqa: F401

from ..common.conftest import backend, dynamic  # noqa: F401  (re-exported fixtures)

"""dicp: the Device-Independent Compile Platform.

Importing dicp is cheap and changes nothing in torch; backends load when torch asks for them
through the `torch_dynamo_backends` entry points.
"""

from .supported_torch import warn_if_untested

__version__ = "0.1.0"

warn_if_untested()


def stats():
    """The compile profile of this process so far (`dicp.profile.Stats`; `.format()` prints
    it). `with dicp.profile.collect() as s:` gives one block's."""
    from dicp.profile import stats as current

    return current()


def __getattr__(name):
    # `dicp.config` without importing it first; loaded on first use (no torch import).
    if name in ("config", "profile"):
        import importlib

        return importlib.import_module(f"dicp.{name}")
    raise AttributeError(f"module 'dicp' has no attribute {name!r}")

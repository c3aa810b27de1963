"""The torch releases dicp supports, in one place, and the import-time check against them.

setup.py reads TORCH_REQUIREMENT from this file without importing dicp. The lower bound is
2.11.0a0, not 2.11: a source build of the 2.11 release is versioned `2.11.0a0+git<sha>`, which
PEP 440 sorts before 2.11, so `>=2.11` would make pip replace a vendor's own 2.11 build. The
upper bound `<2.16` also excludes 2.16 pre-releases (`2.16.0a0+git...`, a build of torch's main
branch): they are untested.

This module imports neither torch nor dicp (importing dicp must not import torch): it reads the
installed torch's version from its package metadata, as pip does.
"""

import warnings
from importlib import metadata

TORCH_SPECIFIER = ">=2.11.0a0,<2.16"
TORCH_REQUIREMENT = "torch" + TORCH_SPECIFIER
TESTED_RELEASES = "2.11 to 2.15"


class UntestedTorchWarning(UserWarning):
    """The running torch is outside the range dicp is tested with."""


def untested_torch_message(version: str):
    """The warning text for torch `version`, or None if dicp supports it.

    A version is supported when pip would keep it installed for TORCH_REQUIREMENT: pip accepts
    an installed pre-release or local build that the specifier admits."""
    try:
        from packaging.specifiers import SpecifierSet
    except ImportError:  # installed with --no-deps and no packaging: nothing to check with
        return None
    if SpecifierSet(TORCH_SPECIFIER).contains(version, prereleases=True):
        return None
    return (
        f"dicp is tested with torch {TESTED_RELEASES} ({TORCH_REQUIREMENT}); this is torch "
        f"{version}. dicp may work, but it is untested here: if something fails, try a "
        f"torch in that range."
    )


def warn_if_untested() -> None:
    """Warn once (at `import dicp`) when the installed torch is outside the supported range."""
    try:
        version = metadata.version("torch")
    except metadata.PackageNotFoundError:  # no torch, or one without metadata: nothing to say
        return
    message = untested_torch_message(version)
    if message:
        warnings.warn(message, UntestedTorchWarning, stacklevel=3)

"""The loaded native runtime (dicp.emu._C), built on first use for the installed torch."""

import functools


@functools.cache
def module():
    from ._build import load_runtime

    return load_runtime()

"""One build of the parts of a cache no test is about, shared by every cache directory the
tests make: the runtime header's precompiled header (pch/) and the emulated device's runtime
(emu/).

A test that needs an empty cache gets a folder of its own, and dicp builds these into each: a
.gch is 24 MB and 2-3 s of g++ in the background (a whole run made 821 of them and filled a CI
disk with 20 GB), the emu runtime half a minute of g++. Both depend only on the compiler, its
flags, the sources and torch, never on a test, so each test cache links these folders to the
ones of the cache directory the session started with, where the op and model suites build
too. Tests that count what a cache holds walk it without following links."""

import os
from pathlib import Path

from dicp import config

SHARED = ("pch", "emu")
# read now, before a test points DICP_CACHE_DIR elsewhere
SESSION_CACHE = Path(config.cache_dir)


def share_runtime_builds(cache_dir) -> Path:
    """`cache_dir`, created, with its SHARED folders the session's."""
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    for name in SHARED:
        (SESSION_CACHE / name).mkdir(parents=True, exist_ok=True)
        link = cache_dir / name
        if not link.exists():
            link.symlink_to(SESSION_CACHE / name, target_is_directory=True)
    return cache_dir


def child_environment(cache_dir, **env) -> dict:
    """The environment of a subprocess run as a user would: this one's without any DICP_
    variable, with `cache_dir` (sharing the runtime builds) as its cache and `env` on top."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("DICP_")}
    full.update(DICP_CACHE_DIR=str(share_runtime_builds(cache_dir)), **env)
    return full

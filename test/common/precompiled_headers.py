"""One set of precompiled runtime headers for every cache directory the tests make.

A test that needs an empty cache gets a folder of its own, and dicp builds the runtime header's
.gch into each (24 MB and 2-3 s of g++ in the background): a whole run made 821 of them, filled a
CI disk with 20 GB and kept a core busy. A .gch depends on the compiler, its flags and the header
text, never on a test, so each test cache links its pch/ folder to the one of the cache directory
the session started with, where the op and model suites build too."""
from pathlib import Path

from dicp import config

# read now, before a test points DICP_CACHE_DIR elsewhere
SHARED = Path(config.cache_dir) / "pch"


def share_precompiled_headers(cache_dir: Path) -> Path:
    """`cache_dir`, created, with its pch/ folder the session's shared one."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    SHARED.mkdir(parents=True, exist_ok=True)
    link = cache_dir / "pch"
    if not link.exists():
        link.symlink_to(SHARED, target_is_directory=True)
    return cache_dir

"""Checked cache entries: the storage of the graph cache and the AOT cache.

An entry is `<cache>/<folder>/<key[:2]>/<key>.pkl` with its sha256 in `<key>.sha256`, both
written atomically, the digest last: an entry without one is a miss. One that fails its digest
or does not load is reported, counted as rejected and compiled again, never trusted.
"""

from pathlib import Path
from collections.abc import Callable

from dicp import config, profile

from ..pipeline.utils import log
from .build import read_with_digest, write_with_digest


class EntryStore:
    def __init__(self, folder: str, what: str):
        self.folder, self.what = folder, what
        self.stats = {"hits": 0, "misses": 0, "stores": 0, "rejected": 0}

    def path(self, key: str) -> Path:
        return config.cache_dir / self.folder / key[:2] / f"{key}.pkl"

    def read(self, key: str, load: Callable):
        """`load(bytes)` of the entry under `key`, or None (missing, corrupt, not loadable, or
        not applying here: `load` returned None, a miss)."""
        path = self.path(key)
        if not path.exists():
            self.stats["misses"] += 1
            return None
        try:
            value = load(read_with_digest(path))
        except Exception as error:  # whatever a damaged entry raises: compile again
            log.warning(
                "dicp: %s entry %s is corrupt (%s); compiling again", self.what, path, error
            )
            self.stats["rejected"] += 1
            return None
        if value is None:
            self.stats["misses"] += 1
            return None
        self.stats["hits"] += 1
        profile.count(f"{self.what} hits")
        return value

    def write(self, key: str, data: bytes) -> None:
        write_with_digest(self.path(key), data)
        self.stats["stores"] += 1

"""The on-disk build cache: content-addressed, atomic, safe across processes.

key = sha256(source + headers + compiler + flags + chip variant + dicp version). An entry is
`<key>.so` plus `<key>.sha256` (the digest of the .so); an entry whose digest does not match
or that fails to load is rebuilt, never trusted. Writes go to a temp file in the same
directory and are renamed into place, so concurrent builders never see a partial file.
"""
import ctypes
import hashlib
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import dicp

from dicp import config, profile

from .utils import log

_STATS = {"builds": 0, "disk_hits": 0, "memory_hits": 0, "rebuilt_corrupt": 0}
_LOADED: dict = {}


class CompileError(RuntimeError):
    """A generated source failed to build; carries the compiler's message and the source path."""


@dataclass(frozen=True)
class BuildSpec:
    source: str
    compiler: str
    flags: tuple
    chip_variant: str
    headers: tuple = ()   # (name, text) pairs the source includes

    def key(self) -> str:
        parts = [self.source, self.compiler, " ".join(self.flags), self.chip_variant,
                 dicp.__version__, *(f"{name}\n{text}" for name, text in self.headers)]
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def cache_stats() -> dict:
    """Counters for this process: g++ builds, disk hits, in-memory hits, corrupt rebuilds."""
    return dict(_STATS)


def loaded_libraries() -> frozenset:
    """Keys of the libraries this process has loaded; a key is a distinct generated source."""
    return frozenset(_LOADED)


def atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_library(spec: BuildSpec) -> ctypes.CDLL:
    """The built library for `spec`: from memory, from the disk cache, or built now."""
    key = spec.key()
    if key in _LOADED:
        _STATS["memory_hits"] += 1
        profile.count("cache hits (memory)")
        return _LOADED[key]
    directory = config.cache_dir / "kernels" / key[:2]
    library = _load_cached(directory, key)
    if library is None:
        profile.count("cache misses")
        with profile.stage("build"):
            library = _build(spec, directory, key)
    _LOADED[key] = library
    return library


def _load_cached(directory: Path, key: str):
    so, digest = directory / f"{key}.so", directory / f"{key}.sha256"
    if not so.exists():
        return None
    try:
        if digest.read_text().strip() != hashlib.sha256(so.read_bytes()).hexdigest():
            raise OSError("digest mismatch")
        library = ctypes.CDLL(str(so))
    except OSError as error:
        log.warning("dicp: cache entry %s is corrupt (%s); rebuilding", so, error)
        _STATS["rebuilt_corrupt"] += 1
        return None
    _STATS["disk_hits"] += 1
    profile.count("cache hits (disk)")
    return library


def _build(spec: BuildSpec, directory: Path, key: str) -> ctypes.CDLL:
    source_path = directory / f"{key}.cpp"
    atomic_write(source_path, spec.source.encode())
    fd, tmp_so = tempfile.mkstemp(dir=directory, prefix=f".{key}.", suffix=".so")
    os.close(fd)
    command = [spec.compiler, *spec.flags, str(source_path), "-o", tmp_so]
    try:
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise CompileError(f"{spec.compiler} failed to build generated source "
                               f"{source_path}:\n{result.stderr.strip()}\ncommand: "
                               f"{' '.join(command)}")
        _STATS["builds"] += 1
        profile.count("cache builds")
        data = Path(tmp_so).read_bytes()
        atomic_write(directory / f"{key}.sha256", hashlib.sha256(data).hexdigest().encode())
        os.replace(tmp_so, directory / f"{key}.so")
    finally:
        Path(tmp_so).unlink(missing_ok=True)
    return ctypes.CDLL(str(directory / f"{key}.so"))

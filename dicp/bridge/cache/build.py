"""The on-disk build cache: content-addressed, atomic, safe across processes, any toolchain.

A backend describes its toolchain (`Toolchain`: the build command, the source and artifact file
suffixes, how to load an artifact, and what else the artifact depends on), and asks for
`load_artifact(BuildSpec(source, toolchain))`. The key is

    sha256(source + build command + suffixes + toolchain key (chip variant, headers, ...)
           + dicp version)

An entry is `<key><artifact suffix>` plus `<key>.sha256` (the artifact's digest) next to the
source `<key><source suffix>`; an entry whose digest does not match or that fails to load is
rebuilt, never trusted. Writes go to a temp file in the same directory and are renamed into
place, so concurrent builders (DDP ranks) never see a partial file.

A compiled graph that must travel (the graph cache, torch's precompile) records which entries
its compile job loaded (`recording()`, giving `ArtifactRef`s). A process that received them
with their bytes installs them under the same keys (`install`) and replays the compile job
inside `prebuilt(refs)`, where a source the refs name loads that entry without computing the
toolchain's key (which may need a compiler) and is never rebuilt.
"""

import ctypes
import hashlib
import os
import subprocess
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable

import dicp

from dicp import config, profile

from ..pipeline.utils import atomic_write, log

_STATS = {"builds": 0, "disk_hits": 0, "memory_hits": 0, "rebuilt_corrupt": 0}
_STATS_LOCK = threading.Lock()  # builds run in worker threads (load_artifacts)
_LOADED: dict = {}  # artifact path -> loaded artifact: per cache directory, each gets its builds
_SCOPE = threading.local()  # .recorded: list of ArtifactRef; .prebuilt: {(digest, suffix): ref}


class CompileError(RuntimeError):
    """A generated source failed to build; carries the compiler's message and the source path."""


@dataclass(frozen=True)
class Toolchain:
    """How generated sources become loadable artifacts. `command` is the argv, where the
    strings "{source}" and "{artifact}" stand for the two paths; `load(path)` returns what the
    backend calls (a ctypes library for host C++); `key` holds everything else the artifact
    depends on that the command does not spell (chip variant, header texts). `prepare(argv)`
    gives the argv a build runs, for what changes how fast the compiler works but not what it
    builds (a precompiled header that may not be ready yet): it is not in the key."""

    command: tuple
    source_suffix: str = ".cpp"
    artifact_suffix: str = ".so"
    load: Callable = ctypes.CDLL
    key: tuple = ()
    prepare: Callable = list

    def argv(self, source: Path, artifact: Path) -> list:
        return [
            str(arg).replace("{source}", str(source)).replace("{artifact}", str(artifact))
            for arg in self.command
        ]


@dataclass(frozen=True)
class BuildSpec:
    source: str
    toolchain: Toolchain

    def key(self) -> str:
        chain = self.toolchain
        parts = [
            self.source,
            "\0".join(map(str, chain.command)),
            chain.source_suffix,
            chain.artifact_suffix,
            dicp.__version__,
            *map(str, chain.key),
        ]
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()


@dataclass(frozen=True)
class ArtifactRef:
    """One cache entry a compiled graph uses: its key, the digest of the source it was built
    from and of the artifact, the file suffixes, and the toolchain's loader."""

    key: str
    source_digest: str
    source_suffix: str
    artifact_suffix: str
    load: Callable

    @property
    def directory(self) -> Path:
        return _kernel_dir(self.key)

    @property
    def artifact_path(self) -> Path:
        return self.directory / f"{self.key}{self.artifact_suffix}"

    def read(self) -> bytes:
        """The artifact's bytes from the cache, checked against its stored digest."""
        data = self.artifact_path.read_bytes()
        digest = (self.directory / f"{self.key}.sha256").read_text().strip()
        if hashlib.sha256(data).hexdigest() != digest:
            raise CompileError(f"cache entry {self.artifact_path} is corrupt; recompile")
        return data


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@contextmanager
def recording():
    """Collects an `ArtifactRef` for every entry `load_artifact` returns inside the block."""
    outer = getattr(_SCOPE, "recorded", None)
    _SCOPE.recorded = refs = []
    try:
        yield refs
    finally:
        _SCOPE.recorded = outer
        if outer is not None:
            outer.extend(refs)


@contextmanager
def prebuilt(refs):
    """Inside the block, a source that one of `refs` was built from loads that entry."""
    outer = getattr(_SCOPE, "prebuilt", None)
    _SCOPE.prebuilt = {**(outer or {}), **{(r.source_digest, r.artifact_suffix): r for r in refs}}
    try:
        yield
    finally:
        _SCOPE.prebuilt = outer


def install(ref: ArtifactRef, data: bytes) -> None:
    """Put artifact bytes received from elsewhere into the cache under `ref.key` (atomic;
    an entry already there whose digest matches is kept)."""
    digest = hashlib.sha256(data).hexdigest()
    try:
        if ref.read() == data:
            return
    except (OSError, CompileError):
        pass
    atomic_write(ref.artifact_path, data)
    atomic_write(ref.directory / f"{ref.key}.sha256", digest.encode())


def _prebuilt_ref(spec):
    table = getattr(_SCOPE, "prebuilt", None)
    if not table:
        return None
    return table.get((_digest(spec.source), spec.toolchain.artifact_suffix))


def _record(spec, key):
    refs = getattr(_SCOPE, "recorded", None)
    if refs is not None:
        chain = spec.toolchain
        refs.append(
            ArtifactRef(
                key, _digest(spec.source), chain.source_suffix, chain.artifact_suffix, chain.load
            )
        )


def cache_stats() -> dict:
    """Counters for this process: g++ builds, disk hits, in-memory hits, corrupt rebuilds."""
    return dict(_STATS)


def loaded_libraries() -> frozenset:
    """Keys of the libraries this process has loaded; a key is a distinct generated source."""
    return frozenset(path.stem for path in _LOADED)


def write_with_digest(path: Path, data: bytes) -> None:
    """`data` at `path`, then its sha256 at `path` with suffix .sha256 (both atomic): an entry
    whose digest is missing is not there yet."""
    atomic_write(path, data)
    atomic_write(path.with_suffix(".sha256"), hashlib.sha256(data).hexdigest().encode())


def read_with_digest(path: Path) -> bytes:
    """The bytes at `path`, checked against their .sha256 (OSError if missing or different)."""
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != path.with_suffix(".sha256").read_text().strip():
        raise OSError("digest mismatch")
    return data


def load_artifact(spec: BuildSpec):
    """The loaded artifact for `spec`: from memory, from the disk cache, or built now."""
    ref = _prebuilt_ref(spec)
    if ref is not None:
        return _load_prebuilt(ref)
    key = spec.key()
    _record(spec, key)
    path = _artifact_path(spec, key)
    if path in _LOADED:
        _STATS["memory_hits"] += 1
        profile.count("cache hits (memory)")
        return _LOADED[path]
    artifact = _load_cached(spec.toolchain.load, path.parent, key, spec.toolchain.artifact_suffix)
    if artifact is None:
        profile.count("cache misses")
        with profile.stage("build"):
            artifact = _build(spec, path.parent, key)
    _LOADED[path] = artifact
    return artifact


def load_artifacts(specs: list) -> list:
    """`load_artifact` of each spec, the missing ones built at once first, one compiler
    process per CPU."""
    missing = list({spec.key(): spec for spec in specs if _must_build(spec)}.values())
    if len(missing) > 1:
        workers = min(len(missing), os.cpu_count() or 1)
        with profile.stage("build"), ThreadPoolExecutor(workers) as pool:
            list(pool.map(_build_into_cache, missing))  # raises the first CompileError
    return [load_artifact(spec) for spec in specs]


def _must_build(spec: BuildSpec) -> bool:
    if _prebuilt_ref(spec) is not None:
        return False
    artifact = _artifact_path(spec, spec.key())
    return artifact not in _LOADED and not artifact.exists()


def _build_into_cache(spec: BuildSpec) -> None:
    """Build `spec` into the disk cache without loading it (in a worker thread: the
    recording and profile scopes are the caller's)."""
    key = spec.key()
    _compile(spec, _kernel_dir(key), key)


def _load_prebuilt(ref: ArtifactRef):
    if ref.artifact_path not in _LOADED:
        loaded = _load_cached(ref.load, ref.artifact_path.parent, ref.key, ref.artifact_suffix)
        if loaded is None:
            raise CompileError(f"prebuilt artifact {ref.artifact_path} is missing or corrupt")
        _LOADED[ref.artifact_path] = loaded
    return _LOADED[ref.artifact_path]


def source_path(spec: BuildSpec) -> Path:
    """Where the cache keeps `spec`'s source (written when it is built)."""
    key = spec.key()
    return _kernel_dir(key) / f"{key}{spec.toolchain.source_suffix}"


def _artifact_path(spec: BuildSpec, key: str) -> Path:
    """Where the cache keeps `spec`'s artifact (`key`: spec.key())."""
    return _kernel_dir(key) / f"{key}{spec.toolchain.artifact_suffix}"


def _kernel_dir(key: str) -> Path:
    return config.cache_dir / "kernels" / key[:2]


def _load_cached(load: Callable, directory: Path, key: str, artifact_suffix: str):
    artifact = directory / f"{key}{artifact_suffix}"
    if not artifact.exists():
        return None
    try:
        read_with_digest(artifact)
        loaded = load(str(artifact))
    except Exception as error:  # a corrupt entry is rebuilt, whatever the loader raised
        log.warning("dicp: cache entry %s is corrupt (%s); rebuilding", artifact, error)
        _STATS["rebuilt_corrupt"] += 1
        return None
    _STATS["disk_hits"] += 1
    profile.count("cache hits (disk)")
    return loaded


def _build(spec: BuildSpec, directory: Path, key: str):
    _compile(spec, directory, key)
    return spec.toolchain.load(str(directory / f"{key}{spec.toolchain.artifact_suffix}"))


def _compile(spec: BuildSpec, directory: Path, key: str) -> None:
    """Run the toolchain on `spec`'s source; the artifact and its digest go into `directory`
    (the source too, next to it, for error messages and debugging)."""
    toolchain = spec.toolchain
    source = directory / f"{key}{toolchain.source_suffix}"
    atomic_write(source, spec.source.encode())
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{key}.", suffix=toolchain.artifact_suffix)
    os.close(fd)
    command = toolchain.prepare(toolchain.argv(source, Path(tmp)))
    artifact = directory / f"{key}{toolchain.artifact_suffix}"
    try:
        try:
            result = subprocess.run(command, capture_output=True, text=True)
        except OSError as error:  # no such compiler: say which one and what to do
            raise CompileError(
                f"cannot run the compiler {command[0]!r} to build {source} "
                f"({error}); install it or point the backend's compiler knob "
                f"at one"
            ) from error
        if result.returncode != 0:
            raise CompileError(
                f"{command[0]} failed to build generated source {source}:\n"
                f"{result.stderr.strip()}\ncommand: {' '.join(command)}"
            )
        with _STATS_LOCK:
            _STATS["builds"] += 1
            profile.count("cache builds")
        data = Path(tmp).read_bytes()
        atomic_write(directory / f"{key}.sha256", hashlib.sha256(data).hexdigest().encode())
        os.replace(tmp, artifact)
    finally:
        Path(tmp).unlink(missing_ok=True)

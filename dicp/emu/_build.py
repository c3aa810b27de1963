"""Builds the emulated device's native runtime (csrc/) for the installed torch, once.

The build lands in `<DICP_CACHE_DIR>/emu/<key>/`, keyed by the torch version, the Python
version, the sources and the flags, so torch environments sharing a cache never mix builds.
A file lock serializes builders: of several processes starting together (pytest-xdist
workers), one builds and the others load its result. An existing build is imported directly,
without ninja. `python -m dicp.emu._build` builds ahead of time (what `import dicp.emu` does).
"""

import contextlib
import fcntl
import hashlib
import importlib.util
import os
import shutil
import sys
from pathlib import Path

from dicp import config

from .torch_compat import TORCH_VERSION

SOURCES = Path(__file__).parent / "csrc"
UNIT = SOURCES / "all.cpp"  # includes every other source: one translation unit (see there)
MODULE = "dicp_emu_C"
FLAGS = ("-O2",)


class EmuBuildError(RuntimeError):
    """The native runtime failed to build; the message holds the compiler's output."""


def sources() -> list[Path]:
    """What the compiler is given: the one unit, which includes every source of csrc/."""
    return [UNIT]


def build_key() -> str:
    digest = hashlib.sha256()
    for part in (TORCH_VERSION, sys.version, *FLAGS):
        digest.update(part.encode() + b"\0")
    for path in sorted(SOURCES.iterdir()):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:20]


def build_dir() -> Path:
    return Path(config.cache_dir) / "emu" / f"torch-{TORCH_VERSION}-{build_key()}"


def load_runtime(directory: Path | None = None):
    """The runtime module, built first if this torch and these sources have no build yet."""
    directory = directory or build_dir()
    directory.mkdir(parents=True, exist_ok=True)
    with _locked(directory.parent / f"{directory.name}.lock"):
        built = directory / f"{MODULE}.so"
        if not built.exists():
            _build(directory)
        return _import(built)


def _build(directory: Path, paths=None) -> None:
    """Compile `paths` (the runtime's sources) into `directory`/dicp_emu_C.so."""
    from torch.utils import cpp_extension

    paths = sources() if paths is None else paths
    directory.mkdir(parents=True, exist_ok=True)
    with _ninja_on_path():
        try:
            cpp_extension.load(
                MODULE,
                [str(p) for p in paths],
                extra_cflags=list(FLAGS),
                extra_include_paths=[str(SOURCES)],
                build_directory=str(directory),
                verbose=False,
            )
        except (RuntimeError, OSError) as error:
            raise EmuBuildError(
                f"building dicp.emu's runtime for torch {TORCH_VERSION} "
                f"failed in {directory}:\n{error}"
            ) from None


def _import(path: Path):
    if MODULE in sys.modules:
        return sys.modules[MODULE]
    spec = importlib.util.spec_from_file_location(MODULE, path)
    if spec is None or spec.loader is None:
        raise EmuBuildError(f"{path} is not a loadable extension module: delete {path.parent}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[MODULE] = module
    return module


@contextlib.contextmanager
def _locked(path: Path):
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def _ninja_on_path():
    """torch builds with the `ninja` command; the ninja package's binary sits next to the
    interpreter of an environment that is not activated."""
    if shutil.which("ninja"):
        yield
        return
    saved = os.environ.get("PATH", "")
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), saved])
    try:
        yield
    finally:
        os.environ["PATH"] = saved


if __name__ == "__main__":
    load_runtime()
    print(build_dir())

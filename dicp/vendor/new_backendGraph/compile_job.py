"""new_backendgraph's toolchain (g++ command, chip-variant flags, runtime header) and the
compile job: build the graph's C++, then load its wrapper with the kernels."""

import ctypes
import hashlib
import math
import os
import platform
import subprocess
import tempfile
from functools import lru_cache, partial
from pathlib import Path
from types import SimpleNamespace

from dicp.api import (
    BuildSpec,
    Toolchain,
    atomic_write,
    config as dicp_config,
    load_artifacts,
    load_wrapper,
    profile,
)

from . import bounds, config
from .background import background as _background
from .blas import sgemm_address
from .codegen.templates import INCLUDE_DIR

# -fno-math-errno and -fno-trapping-math change no value: they drop errno writes and FP
# exception flags, which nothing reads, and let g++ turn selects (clamps, where, NaN checks)
# into vector blends, so those loops vectorize.
# -ffp-contract=off: g++ contracts a * b - c into one fused multiply-add by default in C++
# (on a chip with FMA, which -march=native picks up), skipping the product's rounding. The
# generated code is then rounded differently on each chip, and a layer norm backward over one
# element, g*w - sum(g*w), came out 7.4e-5 instead of 0 (OpInfo native_layer_norm). Inductor
# builds with it off too.
# -fno-tree-pre: after a row's reduction loops, partial redundancy elimination carries the
# row's invariant loads (its mean, its rstd) into the next loop through a phi, which leaves
# that loop's latch non-empty and g++ then refuses to vectorize it: layer norm's backward
# ran its final pass scalar, 474 us against 109 us without PRE. Over the kernels of the
# model suite and bench/, turning it off vectorizes 20 more loops and none fewer (the loop IR
# already removes common subexpressions itself).
BASE_FLAGS = (
    "-O3",
    "-std=c++17",
    "-shared",
    "-fPIC",
    "-fopenmp",
    "-fno-math-errno",
    "-fno-trapping-math",
    "-ffp-contract=off",
    "-fno-tree-pre",
    "-Wno-unused-variable",
    "-pipe",
)


def chip_flags(variant: str) -> tuple:
    """-march for the chip variant. One code path: the variant changes flags, not logic.

    g++ tunes most AVX-512 chips to 256-bit vectors (the clock drops on early Intel ones);
    like Inductor, whose vectors are 16 floats on any AVX-512 chip, kernels take 512-bit
    ones: 1.1x on softmax+GELU and layer norm on a Zen 4. An x86 chip without AVX-512
    ignores the flag; other architectures' g++ does not know it."""
    if variant in ("", "generic"):
        return ()
    wide = ("-mprefer-vector-width=512",) if platform.machine() in ("x86_64", "AMD64") else ()
    return (f"-march={variant}", *wide)


@lru_cache(maxsize=None)
def _header_texts():
    return tuple((p.name, p.read_text()) for p in sorted(INCLUDE_DIR.glob("*.h")))


def toolchain() -> Toolchain:
    """g++ building a shared library loaded with ctypes; the key adds what `-march=native`
    means on this CPU and the runtime header's text. A build uses the precompiled header
    when it is ready (`with_precompiled_header`), which changes how long g++ takes, not what
    it builds: the key is the same either way."""
    variant = config.chip_variant()
    key_variant = f"native:{config.host_cpu()}" if variant == "native" else variant
    compiler = config.compiler()
    flags, libraries = _final_flags(compiler, BASE_FLAGS + chip_flags(variant))
    command = (compiler, *flags, f"-I{INCLUDE_DIR}", "{source}", "-o", "{artifact}", *libraries)
    return Toolchain(
        command,
        key=(key_variant, *_header_texts()),
        prepare=partial(with_precompiled_header, compiler, flags),
    )


def prepare_toolchain() -> None:
    """Start what builds need and the cache may not hold yet, in the background: the libmvec
    probe, then the precompiled header. The backend calls this when a compile begins, so
    that both overlap dynamo's and AOTAutograd's tracing instead of waiting for codegen
    (about 1 s and 2-3 s of g++ on a cold start)."""
    if config.codegen_target() != "cpp":  # the other targets build nothing
        return
    compiler = config.compiler()
    flags = BASE_FLAGS + chip_flags(config.chip_variant())
    _background(_prepare, compiler, flags, dicp_config.cache_dir)


def _prepare(compiler, flags, cache_dir) -> None:
    """In the toolchain thread: outside the compile profile's stages, which the compiling
    thread's time fills (this one's would count twice)."""
    if _background(_probe_remembered, compiler, flags, cache_dir).result():
        flags = flags + ("-DDICP_HAVE_LIBMVEC",)
    _background(_build_precompiled_header, compiler, flags, cache_dir)


def _final_flags(compiler, flags):
    """(flags, libraries): `flags` with libmvec's where the probe passes (waits for it)."""
    job = _background(_probe_remembered, compiler, flags, dicp_config.cache_dir)
    if not job.done():
        with profile.stage("build"):
            job.result()
    if job.result():
        return flags + ("-DDICP_HAVE_LIBMVEC",), ("-lmvec",)
    return flags, ()


_LIBMVEC_PROBE = """#include "dicp_runtime.h"
extern "C" void probe(const float* __restrict__ x, float* __restrict__ y, long n) {
  for (long i = 0; i < n; ++i) y[i] = dicp::sin<float>(x[i]) + dicp::cos<float>(x[i]);
}
"""


def _probe_remembered(compiler, flags, cache_dir) -> bool:
    """Whether kernels built with `flags` may call glibc's vector sin and cos: a probe library
    using them builds, loads and computes sin + cos right. Remembered on disk per compiler,
    flags and C library (`<cache>/toolchain/`), so only a cold start pays the probe's build."""
    key = hashlib.sha256(repr((compiler, flags, platform.libc_ver())).encode()).hexdigest()[:16]
    remembered = cache_dir / "toolchain" / f"libmvec-{key}"
    try:
        return remembered.read_text() == "yes"
    except OSError:
        pass
    works = _libmvec_probe(compiler, flags)
    try:
        atomic_write(remembered, b"yes" if works else b"no")
    except OSError:  # a read-only cache probes again in the next process
        pass
    return works


def _libmvec_probe(compiler, flags) -> bool:
    with tempfile.TemporaryDirectory() as directory:
        source, library = Path(directory) / "probe.cpp", Path(directory) / "probe.so"
        source.write_text(_LIBMVEC_PROBE)
        if not _runs(
            [
                compiler,
                *flags,
                "-DDICP_HAVE_LIBMVEC",
                f"-I{INCLUDE_DIR}",
                str(source),
                "-o",
                str(library),
                "-lmvec",
            ]
        ):
            return False
        try:
            probe = ctypes.CDLL(str(library)).probe
        except OSError:
            return False
        probe.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]
        xs = [0.5 * i - 7.0 for i in range(40)]
        x, y = (ctypes.c_float * len(xs))(*xs), (ctypes.c_float * len(xs))()
        probe(ctypes.addressof(x), ctypes.addressof(y), len(xs))
        return all(abs(got - (math.sin(v) + math.cos(v))) < 1e-5 for v, got in zip(xs, y))


def build_spec(source: str) -> BuildSpec:
    return BuildSpec(source, toolchain())


def with_precompiled_header(compiler, flags, argv: list) -> list:
    """`argv` reading the runtime header from the precompiled header's folder when that is
    built; else as it is, and the header's build started in the background.

    Parsing <cmath> and friends is most of a small kernel's build time (a 4-kernel source:
    1.4-1.8 s, 0.8-1.2 s with the header precompiled); building the header takes 2-3 s, so a
    build never waits for it. g++ silently uses the text header instead whenever the .gch
    does not match, so this is only a speed-up."""
    directory = precompiled_header_dir(compiler, flags)
    if directory is None:
        return argv
    return [f"-I{directory}" if arg == f"-I{INCLUDE_DIR}" else arg for arg in argv]


def precompiled_header_dir(compiler, flags):
    """The cache folder holding the runtime header and its .gch for these flags, or None
    while it is not built (its build is then started in the background)."""
    directory = _precompiled_header_path(compiler, flags, dicp_config.cache_dir)
    if (directory / "dicp_runtime.h.gch").exists():
        return directory
    _background(_build_precompiled_header, compiler, flags, dicp_config.cache_dir)
    return None


def _precompiled_header_path(compiler, flags, cache_dir) -> Path:
    key = hashlib.sha256(repr((compiler, flags, _header_texts())).encode()).hexdigest()[:16]
    return cache_dir / "pch" / key


def _build_precompiled_header(compiler, flags, cache_dir) -> None:
    directory = _precompiled_header_path(compiler, flags, cache_dir)
    gch = directory / "dicp_runtime.h.gch"
    if gch.exists():
        return
    for name, text in _header_texts():
        atomic_write(directory / name, text.encode())
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".pch.", suffix=".gch")
    os.close(fd)
    command = [compiler, *flags, "-x", "c++-header", str(directory / "dicp_runtime.h"), "-o", tmp]
    try:
        if _runs(command):  # else the plain header still works
            os.replace(tmp, gch)
    finally:
        Path(tmp).unlink(missing_ok=True)


def _runs(command) -> bool:
    """Whether `command` ran and succeeded (no compiler at all counts as failure: a process
    loading a precompiled function has none, and needs no header)."""
    try:
        return subprocess.run(command, capture_output=True).returncode == 0
    except OSError:
        return False


class KernelTable:
    """Attribute access to the kernels of a graph's built libraries, with their ctypes
    signatures. Built with bounds checks, each raises BoundsError after a call that accessed
    memory outside a buffer; a kernel that divides integers (`dividing`) raises
    ZeroDivisionError after a call that divided by zero. An entry (`entries`) runs kernels of
    every library, so it reads all their records."""

    def __init__(self, libraries, signatures, graph_name, entries=(), dividing=()):
        readers = [bounds.error_reader(library) for library in libraries]
        zero_readers = [
            bounds.zero_division_reader(library) if dividing else None for library in libraries
        ]
        for library, reader, zero_reader in zip(libraries, readers, zero_readers):  # noqa: B007
            for name, (pointers, symbols) in signatures.items():
                fn = getattr(library, name, None)
                if fn is None:  # in another of the graph's libraries
                    continue
                fn.argtypes = [ctypes.c_void_p] * pointers + [ctypes.c_int64] * symbols
                fn.restype = None
                every = name in entries
                recorders = _present(readers if every else [reader])
                zero = _present(zero_readers if every or name in dividing else [])
                setattr(
                    self,
                    name,
                    bounds.checked(fn, f"{graph_name} {name}", recorders, zero)
                    if recorders or zero
                    else fn,
                )
        missing = [name for name in signatures if not hasattr(self, name)]
        if missing:
            raise AttributeError(f"{graph_name}: kernels {missing} are in none of its libraries")


def _present(readers):
    return [reader for reader in readers if reader is not None]


def _connect_entry(libraries, library, entry, graph_name):
    """Pass the native entries (in `library`) torch's BLAS product and the kernels of the
    graph's other `libraries` (codegen/native_entry.py)."""
    if entry["products"]:
        address = sgemm_address()
        if address is None:
            raise RuntimeError(
                f"{graph_name}: its native entry calls the BLAS sgemm_, which "
                f"this torch does not export; set DICP_NATIVE_ENTRY=0"
            )
        library.dicp_set_sgemm.argtypes, library.dicp_set_sgemm.restype = [ctypes.c_void_p], None
        library.dicp_set_sgemm(address)
    if entry["external"]:
        table = (ctypes.c_void_p * len(entry["external"]))(
            *(_address(libraries, name) for name in entry["external"])
        )
        library.dicp_set_kernels.argtypes, library.dicp_set_kernels.restype = (
            [ctypes.c_void_p],
            None,
        )
        library.dicp_set_kernels(table)


def _address(libraries, name):
    """The address of function `name` in the one of `libraries` defining it."""
    function = next(f for f in (getattr(lib, name, None) for lib in libraries) if f is not None)
    return ctypes.cast(function, ctypes.c_void_p).value


def python_kernels(generated):
    """The kernels of a graph printed as Python, as attributes."""
    scope = {}
    exec(compile(generated.files["kernels.py"], f"<dicp {generated.name} kernels>", "exec"), scope)
    return SimpleNamespace(**{name: scope[name] for name in generated.metadata["kernels"]})


def compile_job(generated, ctx):
    """Build the graph's C++ (if any), then load its wrapper; returns `call(args)`."""
    signatures = generated.metadata.get("kernels", {})
    profile.count("kernels", len(signatures))
    entry = generated.metadata.get("entry")
    if entry is not None:
        signatures = {
            **signatures,
            **{name: tuple(counts) for name, counts in entry["functions"].items()},
        }
    names = [
        name
        for name in sorted(generated.files)  # kernels*.cpp
        if name.startswith("kernels") and name.endswith(".cpp")
    ]
    kernels = None
    if names:
        libraries = load_artifacts([build_spec(generated.files[name]) for name in names])
        kernels = KernelTable(
            libraries,
            signatures,
            generated.name,
            entry["functions"] if entry is not None else (),
            generated.metadata.get("divide_integers", ()),
        )
        if entry is not None:
            _connect_entry(
                libraries, libraries[names.index(entry["source"])], entry, generated.name
            )
    elif "kernels.py" in generated.files:  # the python_loops target: no build
        kernels = python_kernels(generated)
    namespace = {"kernels": kernels, "storage_extent": bounds.storage_extent}
    return load_wrapper(generated, namespace, ctx.source_path("wrapper.py"))

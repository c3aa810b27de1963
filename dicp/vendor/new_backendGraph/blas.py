"""The address of the BLAS `sgemm_` that torch's own float32 `mm` calls, for generated C++.

torch has no public C entry to its matrix product that a library built without libtorch could
call, so the native graph entry (codegen/native_entry.py) calls the standard Fortran BLAS
symbol instead: the registry's builds link MKL into libtorch_cpu and export `sgemm_` from it,
and ATen's `mm` calls that same function for float32 (at::native::cpublas::gemm), so products
round as eager's. A torch without the symbol (a build on another BLAS, or none) gets None, and
graphs with products keep the per-kernel wrapper.
"""

import ctypes
from functools import lru_cache
from importlib import resources


@lru_cache(maxsize=None)
def sgemm_address():
    """The address of `sgemm_` in torch's CPU library or this process, or None."""
    for library in _candidates():
        try:
            return ctypes.cast(library.sgemm_, ctypes.c_void_p).value
        except AttributeError:
            continue
    return None


def _candidates():
    library = resources.files("torch").joinpath("lib", "libtorch_cpu.so")
    if library.is_file():
        try:
            yield ctypes.CDLL(str(library))
        except OSError:
            pass
    yield ctypes.CDLL(None)

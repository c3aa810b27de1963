"""glibc's heap thresholds set to the ceiling glibc's own rule moves them to, once, when
new_backendgraph first compiles (knob `retain_freed_memory`).

Why: torch's CPU allocator is malloc and free, no cache, so a training step's buffers grow
glibc's heap and shrink it again every step. glibc gives the heap's top back to the system
whenever more than its trim threshold lies free there, and each page given back is faulted in
and zeroed when the next step grows the heap again. glibc raises that threshold by itself, to
twice the largest block it had mapped on its own and then freed (up to 32 MB, so a 64 MB
threshold), but only once such a block comes and goes, which depends on the process's history:
a Swin training step faulted 1,000-2,500 pages a step (about 3 ms of its 10) in one process
and none in another. Setting both thresholds where glibc's rule ends makes that state the
start: blocks below 32 MB come from the heap, and up to 64 MB of freed heap stays mapped.

mallopt is process-wide: eager's allocations in the same process get the same thresholds.
Elsewhere than glibc nothing is set.
"""

import ctypes
import platform
from functools import lru_cache

from dicp.api import config as dicp_config

from .config import OWNER

M_TRIM_THRESHOLD = -1  # glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # DEFAULT_MMAP_THRESHOLD_MAX on 64-bit, the most mallopt takes
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD  # what glibc sets with it

dicp_config.declare(
    "retain_freed_memory",
    dicp_config.Flag(),
    True,
    "on glibc, set malloc's thresholds where glibc's own dynamic rule ends (blocks below "
    "32 MB from the heap, up to 64 MB of freed heap kept mapped) when new_backendgraph "
    "first compiles, so a step's buffers do not fault their pages in again every step; "
    "process-wide (heap.py)",
    owner=OWNER,
)


@lru_cache(maxsize=None)
def retain_freed_memory():
    """Set glibc's heap thresholds (module docstring) once; whether they were set."""
    if not dicp_config.retain_freed_memory or platform.libc_ver()[0] != "glibc":
        return False
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )

"""dicp's toolchain thread: jobs that build beside the compile (the libmvec probe, the
precompiled header: compile_job.py), each once per process, and a wait for them all."""

import threading
from concurrent.futures import ThreadPoolExecutor, wait

_JOBS: dict = {}  # (function, arguments) -> Future: each toolchain job runs once per process
_JOBS_LOCK = threading.Lock()
_EXECUTOR = []


def background(fn, *args):
    """`fn(*args)` in dicp's toolchain thread, once per process and arguments: its Future."""
    with _JOBS_LOCK:
        job = _JOBS.get((fn, args))
        if job is None:
            if not _EXECUTOR:
                _EXECUTOR.append(ThreadPoolExecutor(2, thread_name_prefix="dicp-toolchain"))
            job = _JOBS[(fn, args)] = _EXECUTOR[0].submit(fn, *args)
    return job


def wait_for_toolchain() -> None:
    """Return once the toolchain thread's jobs (the libmvec probe, the precompiled header's
    build: g++ on one of the machine's cores) are done, those they started included. gemm.py
    times two libraries' products and keeps the faster on disk for every later process: timed
    beside a build, a product on two threads shares a core with g++."""
    while True:
        with _JOBS_LOCK:
            pending = [job for job in _JOBS.values() if not job.done()]
        if not pending:
            return
        wait(pending)

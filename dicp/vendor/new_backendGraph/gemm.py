"""Matrix products from the faster of two kernel libraries, measured per shape.

ATen's `mm`/`addmm` (MKL in the registry's builds) and oneDNN's inner product compute the same
float32 product, rounded differently. Neither wins everywhere: on an AMD EPYC (Zen 4, two
threads) oneDNN took 0.60-0.97x MKL's time for a Linear's forward shapes and 1.1x for its
weight gradient (g.t() @ x). So the first product of each shape times both on its own operands
and keeps the faster, as Inductor's max-autotune does; the choices are kept on disk per CPU,
torch build and thread count (`<cache>/gemm/`), so a warm process measures nothing.

oneDNN's product is reached through onednn.py (a private torch operator, isolated there).
DICP_GEMM_LIBRARY=aten keeps ATen's product everywhere (eager's rounding).
"""

import hashlib
import json
import time
from functools import lru_cache

import torch

from dicp.api import (
    TORCH_VERSION,
    atomic_write,
    build_config,
    config as dicp_config,
    log,
    unset_fake_temporarily,
)

from . import config, onednn
from .background import wait_for_toolchain

LIBRARIES = ("auto", "aten", "onednn")
dicp_config.declare(
    "gemm_library",
    dicp_config.Choice(*LIBRARIES),
    "auto",
    "float32 `mm`/`addmm`: `auto` times ATen's and oneDNN's product once per "
    "shape and keeps the faster (remembered under `<cache>/gemm/`); `aten` or "
    "`onednn` always",
    owner="new_backendgraph",
)

# Products smaller than this (M * N * K) take ATen's: timing them costs more than it saves.
AUTOTUNE_MIN_WORK = 64**3
WARMUP_RUNS = 5
TIMED_RUNS = 11
NOISE_MARGIN = 0.03
ROUNDS = 3
MAX_REMEMBERED_SITES = 4096
ROUND_SECONDS = 0.25  # about what a round's runs may take; long products run fewer times
# The way of measuring, in the stored choices' key: before 2, the native entry's choices were
# timed on fake tensors (ATen's always won) and are not kept.
MEASUREMENT = 2


# `out`: memory of the result's layout that the product may write into (the wrapper passes a
# dead buffer's, Operator.writes_out). ATen's products use it; oneDNN's and the rare forms
# return new memory instead.
def mm(a, b, out=None):
    return _product(None, a, b, out)


def addmm(bias, a, b, beta=1, alpha=1, out=None):
    if beta != 1 or alpha != 1 or bias.shape != (b.shape[1],) or bias.stride() != (1,):
        return torch.addmm(bias, a, b, beta=beta, alpha=alpha)
    return _product(bias, a, b, out)


def bmm(a, b, out=None):
    return torch.bmm(a, b) if out is None else torch.bmm(a, b, out=out)


def library_for(a_layout, b_layout, bias):
    """The library `_product` takes for float32 operands of these (sizes, strides) layouts and
    a bias or not, decided before any operand exists (the native entry: codegen/
    native_entry.py), on random operands timed as the first product of a shape would be."""
    with unset_fake_temporarily():  # codegen runs in the compile's fake mode: time real ones
        a, b = (torch.empty_strided(*layout).normal_() for layout in (a_layout, b_layout))
        return _library(torch.zeros(b.shape[1]) if bias else None, a, b)


def _product(bias, a, b, out=None):
    library = _library(bias, a, b)
    if library == "onednn":
        return _onednn(bias, a, b)
    return aten_product(bias, a, b, out)


# ATen's product (MKL's in the registry's builds), also the 1x1 convolutions' (convolution.py):
# torch.mm and torch.addmm rather than torch.ops.aten's overloads, the same kernels without
# the overload's Python call (3 us of a step's every product).
def aten_product(bias, a, b, out=None):
    if bias is None:
        return torch.mm(a, b) if out is None else torch.mm(a, b, out=out)
    return torch.addmm(bias, a, b) if out is None else torch.addmm(bias, a, b, out=out)


def _onednn(bias, a, b):
    """a @ b (+ bias) as oneDNN's inner product, whose weight is b transposed ([N, K])."""
    return onednn.linear(a, b.t(), bias)


def _library(bias, a, b):
    """The library for this product: remembered per operand layout and knob value, since
    working it out again took 10 us a call (a wrapper calls the same products every step)."""
    choice = dicp_config.gemm_library
    site = (
        choice,
        a.shape,
        a.stride(),
        a.dtype,
        b.shape,
        b.stride(),
        b.dtype,
        None if bias is None else (bias.shape, bias.stride(), bias.dtype),
        a.device,
        b.device,
        torch.get_num_threads(),
    )
    library = _chosen.get(site)
    if library is None:
        if len(_chosen) >= MAX_REMEMBERED_SITES:  # dynamic shapes: one site per size seen
            _chosen.clear()
        library = _chosen[site] = _library_for(choice, bias, a, b)
    return library


def _library_for(choice, bias, a, b):
    if choice == "aten" or not _onednn_applies(bias, a, b):
        return "aten"
    if choice == "onednn":
        return choice
    key = _shape_key(bias, a, b)
    if key is None:
        return "aten"
    if key not in _decided:
        _decided[key] = _stored_choices().get(key) or _measured(key, bias, a, b)
    return _decided[key]


def _onednn_applies(bias, a, b):
    """float32 CPU matrices, each row-major or transposed, none empty."""
    return (
        a.dtype == b.dtype == torch.float32
        and a.device.type == b.device.type == "cpu"
        and (bias is None or bias.dtype == torch.float32)
        and a.numel()
        and b.numel()
        and _layout(a)
        and _layout(b)
        and onednn.has("_linear_pointwise")
    )


def _layout(t):
    """'n' for a row-major matrix, 't' for a transposed one, None for any other layout."""
    (rows, cols), (row_stride, col_stride) = t.shape, t.stride()
    if (col_stride == 1 or cols == 1) and (row_stride == cols or rows == 1):
        return "n"
    if (row_stride == 1 or rows == 1) and (col_stride == rows or cols == 1):
        return "t"
    return None  # expanded (a stride 0), sliced, or any other: ATen's


def _shape_key(bias, a, b):
    """The choice's key, or None for products too small to be worth timing."""
    (m, k), n = a.shape, b.shape[1]
    if m * n * k < AUTOTUNE_MIN_WORK:
        return None
    return (
        f"{m}x{k}x{n}:{_layout(a)}{_layout(b)}:{'bias' if bias is not None else 'mm'}:"
        f"{torch.get_num_threads()}"
    )


def _measure(bias, a, b):
    """The faster library on these operands: oneDNN only if it wins each of ROUNDS rounds,
    so near-ties and flukes keep ATen (eager's rounding). A round: after WARMUP_RUNS each
    (oneDNN creates its primitive, the thread pool wakes up: one run was not enough, a
    process's first measurement then favoured ATen), TIMED_RUNS interleaved (fewer of both
    for a product too long to time so often: _run_counts); oneDNN wins it
    if its fastest run beats ATen's by more than the noise margin. The fastest run, not the
    median: other processes only ever add time, and 7 medians on a loaded machine kept ATen
    for a g.t() @ x that oneDNN ran in 0.75x its time. Several rounds: one round taken while
    other processes ran chose oneDNN for a Swin's MLP products (stored on disk for every
    later process), which it ran in 1.15-1.25x ATen's time (a training step 1.1x slower)."""
    wait_for_toolchain()  # not beside our own g++ (a cold start builds while it traces)
    return "onednn" if all(_onednn_wins(bias, a, b) for _ in range(ROUNDS)) else "aten"


def _onednn_wins(bias, a, b) -> bool:
    candidates = {"aten": lambda: aten_product(bias, a, b), "onednn": lambda: _onednn(bias, a, b)}
    times = {name: [] for name in candidates}
    first_runs = []
    for fn in candidates.values():
        start = time.perf_counter()
        fn()  # oneDNN creates its primitive here
        first_runs.append(time.perf_counter() - start)
    warmup, timed = _run_counts(max(first_runs))
    for fn in candidates.values():
        for _ in range(warmup - 1):
            fn()
    for run in range(timed):
        for name, fn in sorted(candidates.items(), reverse=run % 2 == 1):  # neither always first
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    aten_time, onednn_time = (min(times[name]) for name in candidates)
    return onednn_time < aten_time * (1 - NOISE_MARGIN)


def _run_counts(seconds):
    """(warm-up, timed) runs of each library in a round, after a first run of `seconds`:
    WARMUP_RUNS and TIMED_RUNS where they fit in ROUND_SECONDS, else fewer (2 and 3 at
    least). With all of them, a 512x4096x4096 product (a 7B model's projection) took 6.5 s
    of the compile per shape."""
    if 2 * seconds * (WARMUP_RUNS + TIMED_RUNS) <= ROUND_SECONDS:
        return WARMUP_RUNS, TIMED_RUNS
    affordable = int(ROUND_SECONDS / (2 * seconds)) - 2
    return 2, max(3, min(TIMED_RUNS, affordable))


# ---- choices: in memory for this process, on disk for the next ----

_decided = {}  # shape key -> library, whatever the cache directory: a fact about this machine
_chosen = {}  # operand layouts and knob value (_library's site) -> library


def _measured(key, bias, a, b):
    library = _measure(bias, a, b)
    _remember(key, library)
    return library


@lru_cache(maxsize=None)
def _build_id():
    # the measurement too: choices made by an earlier, noisier one are not kept
    build = repr(
        (
            TORCH_VERSION,
            build_config(),
            config.host_cpu(),
            (WARMUP_RUNS, TIMED_RUNS, NOISE_MARGIN, ROUNDS, ROUND_SECONDS, AUTOTUNE_MIN_WORK),
            MEASUREMENT,
        )
    )
    return hashlib.sha256(build.encode()).hexdigest()[:16]


def _choices_file():
    """One JSON file per CPU, torch build (its MKL and oneDNN versions) and way of
    measuring."""
    return dicp_config.cache_dir / "gemm" / f"{_build_id()}.json"


def _stored_choices():
    """The choices stored on disk; a missing or damaged file counts as none."""
    try:
        stored = json.loads(_choices_file().read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(stored, dict):
        return {}
    return {k: v for k, v in stored.items() if isinstance(k, str) and v in ("aten", "onednn")}


def _remember(key, library):
    path = _choices_file()
    choices = {**_stored_choices(), key: library}
    try:
        atomic_write(path, json.dumps(choices, indent=0, sort_keys=True).encode())
    except OSError as error:  # a read-only cache still computes right, it only measures again
        log.info("dicp: cannot store GEMM choices in %s: %s", path, error)

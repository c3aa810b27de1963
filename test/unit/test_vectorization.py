"""Hot pointwise loops vectorize: g++'s own vectorization report (-fopt-info-vec-optimized) on
the kernels new_backendgraph generates, built with the backend's real command and flags.

A libm call (std::tanh, std::log, ...) in a loop body keeps g++ from vectorizing the loop; the
runtime header's inline versions must not.
"""

import re
import subprocess

import pytest
import torch
import torch.nn.functional as F

from dicp.vendor.new_backendGraph.compile_job import toolchain

from .helpers import cold_cache, compiled  # noqa: F401  (fixture)


def chain(x):  # the pointwise chain of bench/bench_workloads.py
    y = torch.sigmoid(x) * torch.tanh(x)
    return torch.clamp(torch.where(x > 0, torch.exp(-y), y), -0.5, 0.5)


CASES = {
    "sigmoid_tanh_chain": chain,
    "tanh": torch.tanh,
    "log": lambda x: torch.log(x.abs()),
    "log1p_expm1": lambda x: torch.log1p(x.abs()) + torch.expm1(x),
    "gelu": F.gelu,
    "silu": F.silu,
    "sin_cos": lambda x: torch.sin(x) * torch.cos(x * 3),  # through libmvec (compile_job)
}


def vectorized_lines(source_path, tmp_path):
    """Source lines g++ reports as vectorized loops when building `source_path`."""
    argv = toolchain().argv(source_path, tmp_path / "kernel.so") + ["-fopt-info-vec-optimized"]
    report = subprocess.run(argv, capture_output=True, text=True, check=True).stderr
    name = re.escape(source_path.name)
    return {int(m) for m in re.findall(rf"{name}:(\d+):\d+: optimized: loop vectorized", report)}


def simd_loops(lines):
    """(1-based line, header) of each loop under `#pragma omp simd` in `lines`."""
    return [(i + 2, lines[i + 1]) for i, line in enumerate(lines) if "#pragma omp simd" in line]


def assert_vectorized(source_path, tmp_path, loops, shown):
    """g++ reports each loop starting at one of the 1-based `loops` lines as vectorized (it
    names a loop by its header or its first statement); `shown` on failure."""
    reported = vectorized_lines(source_path, tmp_path)
    assert all(reported & {line, line + 1} for line in loops), shown


def loop_lines(source):
    return [i for i, line in enumerate(source.splitlines(), 1) if line.lstrip().startswith("for (")]


@pytest.mark.parametrize("case", CASES)
def test_float32_pointwise_loop_vectorizes(cold_cache, tmp_path, case):
    """(float64 keeps libm's functions where they are more precise; test_math_functions checks
    its values.)"""
    if case == "sin_cos" and "-lmvec" not in toolchain().command:
        pytest.skip("no glibc libmvec here: sin and cos stay scalar libm calls")
    x = torch.randn(4096)
    torch.testing.assert_close(compiled(CASES[case])(x), CASES[case](x))
    sources = sorted(cold_cache.glob("kernels/*/*.cpp"))
    assert len(sources) == 1, sources
    loops = loop_lines(sources[0].read_text())
    assert len(loops) == 1, "one fused pointwise loop"
    assert_vectorized(sources[0], tmp_path, loops, sources[0].read_text())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_type_pointwise_loop_vectorizes(cold_cache, tmp_path, dtype):
    """Loads, stores and float16's rounding after each op convert between the half type and
    float without branches (dicp_runtime.h): the branching float16 conversions kept every
    float16 loop scalar, 1.7x eager's time on a 4M-element chain."""
    x = torch.randn(4096).to(dtype)
    torch.testing.assert_close(compiled(chain)(x), chain(x))
    sources = sorted(cold_cache.glob("kernels/*/*.cpp"))
    assert len(sources) == 1, sources
    loops = loop_lines(sources[0].read_text())
    assert len(loops) == 1, "one fused pointwise loop"
    assert_vectorized(sources[0], tmp_path, loops, sources[0].read_text())


REDUCTIONS = {
    "amax": lambda x: torch.amax(x, -1),
    "amin": lambda x: torch.amin(x, -1),
    "softmax": lambda x: torch.softmax(x, -1),
    "sum": lambda x: x.sum(-1),
}


@pytest.mark.parametrize("case", REDUCTIONS)
def test_float32_reduction_loops_vectorize(cold_cache, tmp_path, case):
    """Every loop under `omp simd` (the reduction loops, and softmax's loop dividing the exps
    its sum loop kept in a row cache) is reported vectorized."""
    x = torch.randn(64, 1024)
    torch.testing.assert_close(compiled(REDUCTIONS[case])(x), REDUCTIONS[case](x))
    sources = sorted(cold_cache.glob("kernels/*/*.cpp"))
    assert len(sources) == 1, sources
    text = sources[0].read_text()
    simd = [line for line, _ in simd_loops(text.splitlines())]
    assert simd, "no reduction loop"
    assert_vectorized(sources[0], tmp_path, simd, text)


def kv_cache_write(cache, positions, rows):
    """Rows written at computed positions, as a LLaMA's rotary key goes into its cache."""
    return cache.index_put((positions,), torch.sin(rows) * 2)


def test_rows_scattered_to_computed_positions_vectorize_along_the_row(cold_cache, tmp_path):
    """A store through a computed row index is serial over rows, and SIMD along each row:
    the row's columns are the lanes, and the position is the same in every lane."""
    cache, rows = torch.randn(64, 128), torch.randn(16, 128)
    positions = torch.randperm(64, generator=torch.Generator().manual_seed(0))[:16]
    torch.testing.assert_close(
        compiled(kv_cache_write)(cache, positions, rows), kv_cache_write(cache, positions, rows)
    )
    sources = sorted(cold_cache.glob("kernels/*/*.cpp"))
    assert len(sources) == 1, sources
    text = sources[0].read_text()
    scatter = next(k for k in text.split('extern "C"') if "wrap_index" in k)
    first = text.splitlines().index(scatter.splitlines()[1]) + 1  # 1-based line of the kernel
    simd = [
        first + i + 1
        for i, line in enumerate(scatter.splitlines()[1:])
        if "#pragma omp simd" in line
    ]
    assert simd, scatter
    assert_vectorized(sources[0], tmp_path, simd, scatter)


def test_layer_norm_backward_loops_vectorize(cold_cache, tmp_path):
    """Layer norm's backward reduces each row twice, then writes the row's gradient from the
    row's mean and rstd. g++'s partial redundancy elimination carried those loads from the
    reduction loops into the last loop, which then ran scalar (4.3x the kernel's time;
    compile_job.BASE_FLAGS). Every `omp simd` loop of the forward and backward vectorizes."""
    weight = torch.randn(256, requires_grad=True)
    x = torch.randn(64, 256, requires_grad=True)
    grad = torch.randn(64, 256)

    def norm(x):
        return F.layer_norm(x, (256,), weight)

    compiled(norm)(x).backward(grad)
    got = x.grad, weight.grad
    x.grad = weight.grad = None
    norm(x).backward(grad)
    torch.testing.assert_close(got, (x.grad, weight.grad))
    sources = sorted(cold_cache.glob("kernels/*/*.cpp"))
    assert len(sources) == 2, sources  # the forward and the backward
    for source in sources:
        text = source.read_text()
        simd = [
            line for line, header in simd_loops(text.splitlines()) if " < 1L;" not in header
        ]  # a loop of one trip has nothing to vectorize
        assert_vectorized(source, tmp_path, simd, text)

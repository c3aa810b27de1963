"""python -m dicp.tools.fuzz: a fixed-seed run that must find nothing, and a run that must catch
a wrong result injected into the generated code (DICP_INJECT_BUG_TESTING_ONLY) and shrink it.

Each run compiles real programs with new_backendgraph (real g++ builds, bounds checks on) into
a cache directory of its own, and compares with eager."""

import os
import subprocess
import sys

import pytest
from test.common.shared_builds import share_runtime_builds

import dicp.vendor.new_backendGraph  # noqa: F401  (declares the backend's knobs)
from dicp.tools.fuzz.driver import Options, fuzz
from dicp.tools.fuzz.generate import FAMILIES, generate, validate

# The default suite's share of the fuzzer: seed 0, forward and backward, 192 programs (they were
# 288, 109 s of the suite); new seeds and longer runs are docs/fuzz.md's.
PROGRAMS = {"static": 128, "dynamic": 64}


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    for name in list(os.environ):
        if name.startswith("DICP_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("DICP_CACHE_DIR", str(share_runtime_builds(tmp_path / "cache")))
    return tmp_path


def run(**options):
    lines = []
    report = fuzz(Options(print=lines.append, **options))
    return report, "\n".join(lines)


@pytest.mark.parametrize("shapes", sorted(PROGRAMS))
def test_fixed_seed_run_finds_no_mismatch(own_cache, shapes):
    report, output = run(seed=0, programs=PROGRAMS[shapes], shapes=shapes, max_shrinks=3)
    # each finding is printed with its shrunk, standalone repro
    assert not report.findings, output
    compared = sum(report.compared.values())
    assert compared >= 0.9 * PROGRAMS[shapes], report.summary()


def test_an_injected_wrong_result_is_found_shrunk_and_reproduced(own_cache, monkeypatch):
    monkeypatch.setenv("DICP_INJECT_BUG_TESTING_ONLY", "aten.mul.Tensor:accuracy")
    report, output = run(seed=3, programs=16, families=("pointwise",), max_shrinks=1)
    assert report.findings, output
    finding = report.findings[0]
    assert finding.failure.kind in ("value", "exact", "grad value"), output
    (program,) = finding.case.programs
    # shrunk to the injected op and at most one producer of its operand (a bool input's
    # `i0 * i0` is no longer a float multiply, so cos(i0) * i0 can be the smallest failing form)
    assert len(program.ops) <= 2 and finding.case.configs == 1, output
    assert any(" * " in op.expr for op in program.ops), output
    assert not any(i.layout for i in program.inputs), output
    repro = own_cache / "repro.py"
    repro.write_text(finding.repro)
    broken = subprocess.run(
        [sys.executable, str(repro)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ),
    )
    assert broken.returncode == 1 and "FAIL" in broken.stdout, broken.stdout + broken.stderr
    monkeypatch.delenv("DICP_INJECT_BUG_TESTING_ONLY")
    fixed = subprocess.run(
        [sys.executable, str(repro)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ),
    )
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr


def test_programs_are_deterministic_and_valid_at_every_size():
    for seed in range(20):
        first, again = generate(seed, configs=3), generate(seed, configs=3)
        assert first == again
        assert first is None or validate(first)


def test_every_family_is_generated():
    families = {f for seed in range(60) for p in [generate(seed)] if p for f in p.families()}
    assert families == set(FAMILIES)


def test_numbers_computed_from_sizes_are_generated():
    """Operands like max(x.shape[0] / 7, 0.25): symbolic numbers under dynamic shapes, whose
    printing into kernels truncated a float max to an integer (kornia's resize)."""
    sources = [p.source() for seed in range(100) for p in [generate(seed, configs=3)] if p]
    assert sum(".shape[" in source for source in sources) >= 2


def test_half_types_widen_to_float64_where_the_program_cannot_run_as_written():
    """The float64 reference of a program that casts to bfloat16 and then meets a float input
    (index_add here) cannot run as written; its second try computes the half types in float64,
    so the program still has an exact arbiter."""
    from dicp.tools.fuzz.check import float64_reference_runs
    import torch

    rows = torch.tensor([0, 1, 1, 0, 1])
    base, source = torch.arange(6).reshape(2, 3), torch.randn(5, 3, dtype=torch.float64)

    def program(base, source):
        return base.to(torch.bfloat16).index_add(0, rows, source, alpha=2), base.bfloat16()

    as_written, widened, _ = float64_reference_runs()
    with pytest.raises(RuntimeError), as_written():
        program(base, source)
    with widened():
        added, cast = program(base, source)
    assert added.dtype == cast.dtype == torch.float64
    assert torch.equal(added, base.double().index_add(0, rows, source, alpha=2))


def test_the_exact_result_rounded_to_the_output_type_passes_the_judge():
    """A float16 prod that eager rounds at every step came out 60736 where the exact product is
    66204, which float16 rounds to inf; dicp's float32 accumulation gives inf. That is the best
    answer there is, not a mismatch (found on torch 2.15 with seed 1126); a value near neither
    eager nor the exact one is still a mismatch."""
    from dicp.tools.fuzz.check import judge
    import torch

    eager = torch.tensor([60736.0, 7.0], dtype=torch.float16)
    exact = torch.tensor([66203.8, 7.0], dtype=torch.float64)
    best = torch.tensor([float("inf"), 7.0], dtype=torch.float16)
    assert judge(best, eager, exact) is None
    assert judge(torch.tensor([float("inf"), 9.0], dtype=torch.float16), eager, exact) is not None


def test_an_inf_both_give_does_not_fail_the_other_elements():
    """sinh of a bfloat16 prod (seed 6060): one element overflows to inf in eager and compiled
    alike, while another, a prod rounded once (-7104), is nearer float64 (-7289) than eager's
    rounded at every step (-7584), but not within tolerance of either. The shared inf made the
    judge call the output non-finite. An inf only one of them gives is still a mismatch."""
    from dicp.tools.fuzz.check import judge
    import torch

    inf = float("inf")
    eager = torch.tensor([-7584.0, -inf, 2.0], dtype=torch.bfloat16)
    exact = torch.tensor([-7289.35, -1e39, 2.0], dtype=torch.float64)
    assert judge(torch.tensor([-7104.0, -inf, 2.0], dtype=torch.bfloat16), eager, exact) is None
    wrong = judge(torch.tensor([-7104.0, -inf, inf], dtype=torch.bfloat16), eager, exact)
    assert wrong is not None and "non-finite" in str(wrong)


def test_where_eager_overflows_to_nan_its_error_is_unbounded():
    """A layer norm of a row holding 7e24 (seed 7218): the square overflows float32, eager's
    Welford step made NaN of the row where dicp and Inductor return the bias (as eager itself
    does for another row). The exact result is finite, so eager's error there is unbounded, as
    where it overflows to inf. A finite value where the exact result is NaN still fails, and so
    does a value off elsewhere."""
    from dicp.tools.fuzz.check import judge
    import torch

    nan = float("nan")
    eager = torch.tensor([nan, nan, 0.25, nan])
    exact = torch.tensor([0.67, -2.18, 0.25, nan], dtype=torch.float64)
    assert judge(torch.tensor([-1.33, -1.68, 0.25, nan]), eager, exact) is None
    assert judge(torch.tensor([-1.33, -1.68, 0.25, 1.0]), eager, exact) is not None
    assert judge(torch.tensor([-1.33, -1.68, 0.5, nan]), eager, exact) is not None


def test_a_float32_cast_meeting_float64_weights_still_has_an_arbiter():
    """x.float() then layer_norm over one element with weights (seed 7070, program 759): the
    exact gradient of x is 0 and dicp's kernel gives 0, eager's rounding -1.5e-5. The float64
    reference cannot run as written (float32 meets float64 weights) nor with only half types
    widened; its last try widens float32 too, so the exact answer is not a mismatch and a wrong
    one still is."""
    from dicp.tools.fuzz.check import float64_reference_runs, judge
    import torch
    import torch.nn.functional as F

    def program(x, weight, bias):
        return F.layer_norm(x.float(), (1, 1), weight, bias, eps=1e-6)

    x = torch.tensor([[[-1.1975]], [[-2.1276]], [[0.8438]]], requires_grad=True)
    weight, bias = torch.tensor([[-1.9207]]), torch.tensor([[0.7552]])
    as_written, half_widened, float_widened = float64_reference_runs()
    x64, weight64, bias64 = (t.detach().double().requires_grad_() for t in (x, weight, bias))
    for context in (as_written, half_widened):
        with pytest.raises(RuntimeError), context():
            program(x64, weight64, bias64)
    with float_widened():
        (reference,) = torch.autograd.grad(program(x64, weight64, bias64).sum(), x64)
    (eager,) = torch.autograd.grad(program(x, weight, bias).sum(), x)
    exact = torch.zeros_like(eager)
    assert judge(exact, eager, reference) is None
    assert judge(exact + 1e-3, eager, reference) is not None


def test_a_gradient_routed_the_other_way_through_a_sorts_tie_passes_the_judge():
    """A sort's gradient at a tie depends on how the tie was broken, and a kernel rounding an
    ulp differently from eager breaks a near tie the other way (seed 7070, program 568: msort of
    a bfloat16 layer_norm). The elements routed through the tie are left out when the gradient
    fails with them in; a wrong gradient anywhere else still fails."""
    import torch
    from dicp.tools.fuzz.check import judge
    from dicp.tools.fuzz.ties import near_ties, tie_affected

    def program(x):
        return (torch.msort(x * 2),)

    x = torch.tensor([[1.0, 5.0], [3.0, 2.0], [1.0, 4.0], [0.5, 7.0]], requires_grad=True)
    weight = torch.tensor([[1.0, 1.0], [10.0, 1.0], [100.0, 1.0], [1000.0, 1.0]])
    (eager,) = torch.autograd.grad(program(x)[0], x, weight)
    other_way = eager.clone()
    other_way[0, 0], other_way[2, 0] = eager[2, 0], eager[0, 0]
    assert near_ties(x.detach(), 0).tolist() == [
        [True, False],
        [False, False],
        [True, False],
        [False, False],
    ]
    (ties,) = tie_affected(program, [x])
    assert ties.tolist() == near_ties(x.detach(), 0).tolist()
    assert judge(other_way, eager) is not None
    assert judge(other_way, eager, ties=ties) is None
    wrong = other_way.clone()
    wrong[1, 1] += 1
    assert judge(wrong, eager, ties=ties) is not None


def test_a_half_type_product_is_judged_against_its_exact_value_not_eagers_rounding():
    """bfloat16 prod then fmod (torch 2.15, seed 1131): eager rounds the product at every step
    (-4.4375), the exact one rounds to -4.40625, which a kernel accumulating in float gives, and
    fmod makes that 1-ulp difference a large one. Run as written, the float64 reference repeated
    eager's rounding, so the better answer was a mismatch; its reductions are now exact. A wrong
    answer is still one."""
    from dicp.tools.fuzz.check import float64_reference_runs, judge
    import torch

    x = torch.tensor([-2.796875, 0.80859375, 1.6796875, -1.4375, -0.80859375])
    y = torch.tensor(0.7)

    def program(x, y):
        return torch.fmod(torch.prod(x.bfloat16(), 0), y)

    eager = program(x, y)
    accumulated = torch.fmod(torch.prod(x.bfloat16().float(), 0).bfloat16(), y)
    as_written, *_ = float64_reference_runs()
    with as_written():
        reference = program(x.double(), y.double())
    assert not torch.equal(accumulated, eager)
    assert judge(accumulated, eager, reference) is None
    assert judge(accumulated + 1.0, eager, reference) is not None


def test_an_integer_from_a_correctly_rounded_sum_passes_the_judge():
    """(sum(x, [0, -2, 2]) - x) cast to int64 (seed 2711, program 243): a sum rounded once to
    float32 puts sum - x a hair above an integer where eager's sum (rounded otherwise) and the
    float64 one (not rounded to float32) put it below, so the cast lands one integer off from
    both. The program with its reductions rounded once (rounded_run) is the third answer the
    judge takes, and is what dicp computes; an integer off from all three is still a
    mismatch."""
    from dicp.tools.fuzz.check import float64_inputs, judge, rounded_run
    import torch

    def program(x):
        return ((x.sum(dim=[0, -2, 2]) - x).to(torch.int64),)

    g = torch.Generator().manual_seed(2735407451384)
    x = (torch.randn(7, 189, 189, generator=g, dtype=torch.float64) * 2).float()
    (answers,), (eager,) = rounded_run(program, [x]), program(x)
    rounded = answers[0]
    (reference,) = program(*float64_inputs([x]))
    assert ((rounded != eager) & (rounded != reference)).any()
    assert judge(rounded, eager, reference) is not None
    assert judge(rounded, eager, reference, rounded=answers) is None
    off = rounded.clone()
    off[0, 0, 0] += 1
    assert judge(off, eager, reference, rounded=answers) is not None


def test_rounded_run_computes_float32_sums_in_float64_and_rounds_once():
    from dicp.tools.fuzz.check import rounded_run
    import torch

    x = torch.tensor([1.0, 1e8, -1e8, 2.0**-20] * 1000)
    ((got, _),) = rounded_run(lambda x: (x.sum(),), [x])
    assert got.dtype == torch.float32
    assert got.item() == x.double().sum().float().item()


def test_integers_promoted_to_float_are_judged_in_float64():
    """argmin(cosh(i)) over an int64 column holding 1, -1, -1 (seed 2711, program 522): a
    three-way tie in exact arithmetic, whose first index (0) dicp gives; eager's vectorized
    cosh gave the last element one ulp less (index 6), and the reference, promoting the int64
    input to the default float32, repeated it. The reference promotes to float64 now."""
    from dicp.tools.fuzz.check import float64_inputs, float64_reference_runs, judge
    import torch

    def program(i):
        return torch.argmin(torch.cosh(i), dim=0)

    g = torch.Generator().manual_seed(2735407732895)
    i = torch.randint(-4, 5, (7, 6), generator=g)
    as_written, *_ = float64_reference_runs()
    with as_written():
        reference = program(*float64_inputs([i]))
    assert torch.get_default_dtype() == torch.float32
    first_of_ties = torch.argmin(torch.cosh(i.double()), dim=0)
    assert torch.equal(reference, first_of_ties)
    assert judge(first_of_ties, program(i), reference) is None
    assert judge(first_of_ties + 1, program(i), reference) is not None


def test_a_bool_from_half_math_kept_in_float32_passes_the_judge():
    """frac(pow(x1 * (x0 + 5), i)) != 0 with x0 float16 (seed 2712, program 705): eager rounds
    x0 + 5 to float16, a fused kernel keeps it in float32 (dicp/tolerance.py), and there the
    power came out 45488.0, whose fractional part is 0, where eager's is 45441.42. The program
    with its half types in float32 is an answer the judge takes; float64 keeps a fractional
    part, so it alone did not."""
    from dicp.tools.fuzz.check import float64_inputs, judge, rounded_run
    import torch

    def program(x0, x1, i2):
        return (torch.frac(torch.pow(x1 * (x0 + 5), i2)) != 0,)

    def draw(seed, shape, dtype):
        g = torch.Generator().manual_seed(seed)
        return (torch.randn(shape, generator=g, dtype=torch.float64) * 2).to(dtype)

    x0, x1 = (
        draw(2736416920569, (5, 6, 5, 6), torch.float16),
        draw(2736416920570, (1,), torch.float32),
    )
    i2 = torch.randint(-4, 5, (6, 5, 6), generator=torch.Generator().manual_seed(2736416920571))
    (answers,), (eager,) = rounded_run(program, [x0, x1, i2]), program(x0, x1, i2)
    (reference,) = program(*float64_inputs([x0, x1, i2]))
    in_float32 = answers[1]
    assert ((in_float32 != eager) & (in_float32 != reference)).any()
    assert judge(in_float32, eager, reference) is not None
    assert judge(in_float32, eager, reference, rounded=answers) is None


def test_the_float64_arbiter_runs_on_contiguous_inputs():
    """Eager's CPU batch_norm backward reads a strided weight as if it were contiguous (seed
    4040, program 301: the gradient of x off by 0.7 for w = randn(6)[::3]). The float64 run,
    given the same strided weight, repeated eager's answer, and dicp's right gradient was a
    mismatch. Its inputs are contiguous copies now, and a wrong gradient is still one."""
    from dicp.tools.fuzz.check import float64_inputs, judge
    import torch
    import torch.nn.functional as F

    def x_gradient(x, w, grad):
        out = F.batch_norm(x, None, None, w, None, training=True, eps=0.1)
        return torch.autograd.grad(out, x, grad)[0]

    g = torch.Generator().manual_seed(4040)
    x = torch.randn(2, 2, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(6, generator=g, dtype=torch.float64)[::3]
    grad = torch.randn(2, 2, generator=g, dtype=torch.float64)
    x64, w64, grad64 = float64_inputs([x, w, grad])
    assert w64.is_contiguous() and torch.equal(w64, w) and x64.requires_grad
    right, reference = x_gradient(x, w.contiguous(), grad), x_gradient(x64, w64, grad64)
    assert judge(right, x_gradient(x, w, grad), reference) is None
    assert judge(right + 0.5, right, reference) is not None


def test_cold_warm_runs_twice_and_compares(own_cache):
    """--cold-warm: a cold and a warm process on one new cache, the warm one's results equal."""
    result = subprocess.run(
        [sys.executable, "-m", "dicp.tools.fuzz", "--seed", "5", "--programs", "16", "--cold-warm"],
        capture_output=True,
        text=True,
        timeout=900,
        env=dict(os.environ),
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.count("mismatches: 0; errors: 0") == 2, result.stdout
    assert "the warm run computed bit for bit what the cold run did" in result.stdout

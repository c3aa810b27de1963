"""The fuzzer on a device backend: what torch's own compile path shares with dicp is judged on
the same device, with the same device copies of the inputs."""

import random

import dicp.vendor.emugraph  # noqa: F401  (the backend and its device)
from dicp.tools.fuzz.driver import _torch_fails_too, program_seed
from dicp.tools.fuzz.generate import FAMILIES, generate, size_pool
from dicp.tools.fuzz.runner import Case, run_case


def test_a_failure_aot_eager_shares_on_the_device_is_torch_side():
    """Seed 8282's dynamic program 189 takes a strided view, which arrives on emu as a view of
    its storage's 1-d copy; dynamo's duck sizing equates that base's size with a stride at the
    first size, and the next size recompiles. aot_eager on emu does the same (on the host, whose
    base has another shape, it did not: the fuzzer counted it as dicp's error)."""
    sizes = size_pool(random.Random(program_seed(8282, 176)), 3)
    program = generate(
        program_seed(8282, 189), configs=3, max_ops=8, families=FAMILIES, name="p189", sizes=sizes
    )
    case = Case((program,), dynamic=True, backend="emugraph")
    failures = run_case(case)
    assert failures and "recompile" in str(failures[0]), failures
    assert _torch_fails_too(case, failures[0])

"""Hands off PrivateUse1: dicp claims it only on `import dicp.emu`, and never from another."""

import pytest
import torch

from .conftest import run_python

# A process where dicp compiles a graph, then another backend takes PrivateUse1 (as a vendor's
# runtime would: the rename raises if the key has another name already), then dicp.emu is
# imported.
ANOTHER_BACKEND = """
    import sys, torch, dicp
    f = torch.compile(lambda x: (x.sin() + 1).sum(), backend="new_backendgraph")
    f(torch.randn(8))
    print("after a compile:", hasattr(torch, "emu"), "dicp.emu" in sys.modules, flush=True)
    torch.utils.rename_privateuse1_backend("npu")
    print("npu took PrivateUse1", flush=True)
    try:
        import dicp.emu
    except RuntimeError as error:  # dicp.emu.PrivateUse1Taken
        print(type(error).__name__, getattr(error, "holder", None))
        print(error)
"""


@pytest.fixture(scope="module")
def another_backend():
    result = run_python(ANOTHER_BACKEND)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_import_dicp_emu_claims_privateuse1_as_emu(emu):
    assert emu.torch_compat.holder() == "emu"
    assert torch.device("emu:1").type == "emu" and torch.emu.device_count() >= 2


def test_a_bare_import_and_a_compile_leave_privateuse1_unclaimed(another_backend):
    assert "after a compile: False False" in another_backend
    assert "npu took PrivateUse1" in another_backend


def test_import_after_another_backend_took_privateuse1_raises_naming_it(another_backend):
    assert "PrivateUse1Taken npu" in another_backend
    assert "PrivateUse1 is already taken by the 'npu' backend" in another_backend

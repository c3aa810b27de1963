"""Hands off PrivateUse1: dicp claims it only on `import dicp.emu`, and never from another."""
import torch

from .conftest import run_python


def test_import_dicp_emu_claims_privateuse1_as_emu():
    assert torch._C._get_privateuse1_backend_name() == "emu"
    assert torch.emu.device_count() >= 2


def test_a_bare_import_and_a_compile_leave_privateuse1_unclaimed():
    result = run_python("""
        import sys, torch, dicp
        f = torch.compile(lambda x: (x.sin() + 1).sum(), backend="new_backendgraph")
        f(torch.randn(8))
        print(torch._C._get_privateuse1_backend_name(), hasattr(torch, "emu"),
              "dicp.emu" in sys.modules)
    """)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split()[-3:] == ["privateuseone", "False", "False"]


def test_import_after_another_backend_took_privateuse1_raises_naming_it():
    result = run_python("""
        import torch
        torch.utils.rename_privateuse1_backend("npu")
        try:
            import dicp.emu
        except RuntimeError as error:  # dicp.emu.PrivateUse1Taken
            print(type(error).__name__, getattr(error, "holder", None))
            print(error)
    """)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "PrivateUse1Taken npu" in result.stdout
    assert "PrivateUse1 is already taken by the 'npu' backend" in result.stdout

"""Device memory is separate: host code reading it without a copy dies at once."""
import signal

from .conftest import run_python

READ = """
    import ctypes, torch, dicp.emu
    x = torch.arange(4, dtype=torch.int32, device="emu")
    torch.emu.synchronize()
    {source} = {expression}
    print("read", list(ctypes.string_at({source}.data_ptr(), 8)), flush=True)
"""


def test_a_host_read_of_device_memory_dies_with_a_signal():
    result = run_python(READ.format(source="t", expression="x"))
    assert result.returncode == -signal.SIGSEGV, (result.returncode, result.stderr[-2000:])
    assert "read" not in result.stdout


def test_the_same_read_after_a_copy_to_the_host_works():
    result = run_python(READ.format(source="t", expression="x.cpu()"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "read [0, 0, 0, 0, 1, 0, 0, 0]" in result.stdout


def test_without_isolation_the_read_goes_unnoticed():
    """What isolation is for: with it off, the same mistake reads the values and passes."""
    result = run_python(READ.format(source="t", expression="x"), DICP_EMU_ISOLATION="0")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "read [0, 0, 0, 0, 1, 0, 0, 0]" in result.stdout

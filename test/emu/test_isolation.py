"""Device memory is separate: host code reading it without a copy dies at once."""

import signal

import pytest

from .conftest import run_python

# The same host read of 8 bytes, first of a copy on the host, then of device memory.
READS = """
    import ctypes, torch, dicp.emu
    x = torch.arange(4, dtype=torch.int32, device="emu")
    torch.emu.synchronize()

    def read(t):
        return list(ctypes.string_at(t.data_ptr(), 8))

    print("after a copy to the host:", read(x.cpu()), flush=True)
    print("device memory:", read(x), flush=True)
"""


@pytest.fixture(scope="module")
def isolated():
    return run_python(READS)


def test_a_host_read_of_device_memory_dies_with_a_signal(isolated):
    assert isolated.returncode == -signal.SIGSEGV, (isolated.returncode, isolated.stderr[-2000:])
    assert "device memory:" not in isolated.stdout


def test_the_same_read_after_a_copy_to_the_host_works(isolated):
    assert "after a copy to the host: [0, 0, 0, 0, 1, 0, 0, 0]" in isolated.stdout


def test_without_isolation_the_read_goes_unnoticed():
    """What isolation is for: with it off, the same mistake reads the values and passes."""
    result = run_python(READS, DICP_EMU_ISOLATION="0")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "device memory: [0, 0, 0, 0, 1, 0, 0, 0]" in result.stdout

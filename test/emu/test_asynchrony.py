"""Work is asynchronous: the host enqueues and returns; host reads wait for what they need.

No clock decides a verdict here. `torch.emu._stall()` holds a stream until the host releases
it, so work queued behind it provably has not run when the host looks; a release from a timer
thread proves that a host read waited (it cannot return before the release).
"""

import threading

import pytest
import torch

from .conftest import run_python


def released_later(stall):
    """Release `stall` from another thread shortly; the returned flag is set first."""
    released = threading.Event()

    def release():
        released.set()
        stall.release()

    threading.Timer(0.05, release).start()
    return released


def test_enqueueing_returns_before_the_kernel_finishes():
    x = torch.ones(1000, device="emu")
    start, end = torch.emu.Event(enable_timing=True), torch.emu.Event(enable_timing=True)
    stall = torch.emu._stall()  # a kernel that lasts until the host releases it
    start.record()
    y = x * 2 + 1
    end.record()
    assert not start.query() and not end.query()  # the host is back; the device is not
    stall.release()
    end.synchronize()
    assert end.query() and start.elapsed_time(end) >= 0
    assert torch.equal(y.cpu(), torch.full((1000,), 3.0))


def test_events_time_device_work():
    start, end = torch.emu.Event(enable_timing=True), torch.emu.Event(enable_timing=True)
    start.record()
    torch.emu._sleep(30)  # a kernel that keeps the device busy for at least 30 ms
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 30


def test_results_are_right_after_synchronize():
    x = torch.arange(6.0, device="emu").reshape(2, 3)
    stall = torch.emu._stall()
    total, rows, exps = (x * 3).sum(), x.sum(1), torch.exp(x)
    done = torch.emu.Event()
    done.record()
    stall.release()
    torch.emu.synchronize()
    assert done.query()  # synchronize returned after the last of them ran
    expected = torch.arange(6.0).reshape(2, 3)
    assert total.item() == 45.0
    assert torch.equal(rows.cpu(), expected.sum(1))
    assert torch.allclose(exps.cpu(), torch.exp(expected))


READS = {
    "cpu": lambda t: t.cpu().tolist(),
    "item": lambda t: [t[i].item() for i in range(4)],
    "print": lambda t: str(t),
    "tolist": lambda t: t.tolist(),
    "nonzero": lambda t: t.nonzero().flatten().tolist(),  # a size that depends on the data
}
EXPECTED = {
    "cpu": [0.0, 2.0, 4.0, 6.0],
    "item": [0.0, 2.0, 4.0, 6.0],
    "print": "tensor([0., 2., 4., 6.], device='emu:0')",
    "tolist": [0.0, 2.0, 4.0, 6.0],
    "nonzero": [1, 2, 3],
}


@pytest.mark.parametrize("read", sorted(READS))
def test_a_host_read_waits_for_the_work_before_it(read):
    x = torch.arange(4.0, device="emu")
    stall = torch.emu._stall()
    y = x * 2  # queued behind the stall
    released = released_later(stall)
    value = READS[read](y)
    assert released.is_set()  # the read could only return after the device went on
    assert value == EXPECTED[read]


@pytest.mark.parametrize("read", sorted(READS))
def test_a_host_read_waits_for_its_own_stream_only(read):
    other = torch.emu.Stream()
    with torch.emu.stream(other):
        stall = torch.emu._stall()  # unrelated work, held
    y = torch.arange(4.0, device="emu") * 2
    assert READS[read](y) == EXPECTED[read]  # returns although `other` is still held
    assert not other.query()
    stall.release()
    other.synchronize()


def test_a_missing_wait_before_a_host_read_gives_a_wrong_result():
    """The proof that the tests above could see a missing wait: an asynchronous copy into
    pinned memory read before synchronizing holds what was there before."""
    x = torch.arange(8.0, device="emu")
    host = torch.full((8,), -1.0).pin_memory()
    stall = torch.emu._stall()
    host.copy_(x * 2, non_blocking=True)  # returns at once; the copy waits behind the stall
    assert torch.equal(host, torch.full((8,), -1.0))  # no wait: the old values
    stall.release()
    torch.emu.synchronize()
    assert torch.equal(host, torch.arange(8.0) * 2)  # with the wait: the result


def test_a_missing_wait_between_streams_gives_a_wrong_result():
    producer, consumer = torch.emu.Stream(), torch.emu.Stream()
    x = torch.zeros(4, device="emu")
    torch.emu.synchronize()
    with torch.emu.stream(producer):
        stall = torch.emu._stall()
        x.fill_(1.0)  # held behind the stall
        filled = torch.emu.Event()
        filled.record()
    with torch.emu.stream(consumer):
        wrong = x + 1  # no wait for `filled`: reads x before the fill
        read = torch.emu.Event()
        read.record()
        read.synchronize()  # it has run, while the producer is still held
        filled.wait()  # the consumer now waits for the fill
        right = x + 1
    stall.release()
    torch.emu.synchronize()
    assert torch.equal(wrong.cpu(), torch.ones(4))
    assert torch.equal(right.cpu(), torch.full((4,), 2.0))


def test_a_failed_kernel_raises_at_the_next_wait():
    x = torch.ones(3, device="emu")
    torch.emu._stall(timeout=0.01)  # fails on the device when nobody releases it
    y = x + 1  # enqueued; the host does not know yet
    with pytest.raises(RuntimeError, match="was not released"):
        torch.emu.synchronize()
    assert torch.equal(y.cpu(), torch.full((3,), 2.0))  # the stream goes on after the error


def test_a_host_wait_under_the_python_dispatcher_lets_the_device_free_python_storages():
    """Kernels called through the Python dispatcher (dynamo's fake tensor propagation runs
    under it) run with the GIL held. A worker freeing a finished task's storage that Python
    has seen takes the GIL, as does the timer releasing the stall: the host's wait must let
    them have it (it deadlocked, seen as OpInfo timeouts on emugraph)."""
    result = run_python(
        """
        import threading, torch, dicp.emu
        from torch._dispatch.python import enable_python_dispatcher
        x = torch.ones(1000, device="emu")
        x + x                          # the op's first call, which loads and waits
        storage = x.untyped_storage()  # the storage gets a Python object
        stall = torch.emu._stall()
        y = x + x                      # its task holds x's storage
        del x, storage                 # its last holders: the task and the Python object
        threading.Timer(0.05, stall.release).start()
        with enable_python_dispatcher():
            print(y.cpu().sum().item())  # waits for the task with the GIL held
    """,
        timeout=120,
    )
    assert result.returncode == 0 and result.stdout.split() == ["2000.0"], result.stderr[-2000:]

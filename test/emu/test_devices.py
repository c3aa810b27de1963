"""Two devices, the device guard, streams and events."""

import pytest
import torch

from .conftest import run_python


def test_the_device_module_is_torch_emu():
    assert torch.emu.is_available() and torch.emu.device_count() >= 2
    assert torch.randn(4, device="emu").device == torch.device("emu", 0)


def test_a_tensor_on_emu_1_and_the_guard():
    x = torch.ones(3, device="emu:1")
    assert x.device == torch.device("emu", 1)
    assert (x * 2).device == torch.device("emu", 1)  # results stay on its device
    assert torch.emu.current_device() == 0
    with torch.emu.device(1):
        assert torch.emu.current_device() == 1
        assert torch.zeros(2, device="emu").device == torch.device("emu", 1)
    assert torch.emu.current_device() == 0
    torch.emu.set_device("emu:1")
    try:
        assert torch.empty(1, device="emu").device.index == 1
    finally:
        torch.emu.set_device(0)


def test_a_copy_between_devices():
    a = torch.randn(5, device="emu:0")
    b = a.to("emu:1")
    assert b.device.index == 1 and torch.equal(b.cpu(), a.cpu())
    c = torch.empty(5, device="emu:0")
    c.copy_(b * 2)
    assert torch.equal(c.cpu(), a.cpu() * 2)


def test_a_copy_between_devices_waits_for_the_source_stream():
    x = torch.arange(4.0, device="emu:0")
    stall = torch.emu._stall(0)
    doubled = x * 2  # held behind the stall on emu:0
    moved = doubled.to("emu:1")  # emu:1's stream waits for emu:0's work first
    stall.release()
    assert torch.equal(moved.cpu(), torch.arange(4.0) * 2)


def test_devices_do_not_mix():
    with pytest.raises(RuntimeError, match="same device.*emu:0.*emu:1"):
        torch.ones(2, device="emu:0") + torch.ones(2, device="emu:1")


def test_streams():
    default = torch.emu.current_stream()
    assert default == torch.emu.default_stream() and default.device_index == 0
    side = torch.emu.Stream()
    assert side != default
    with torch.emu.stream(side):
        assert torch.emu.current_stream() == side
        y = torch.ones(3, device="emu") + 1
    assert torch.emu.current_stream() == default
    side.synchronize()
    assert side.query() and torch.equal(y.cpu(), torch.full((3,), 2.0))
    on_1 = torch.emu.Stream(device=1)
    assert on_1.device_index == 1
    with torch.emu.stream(on_1):
        assert torch.emu.current_device() == 1
    assert torch.emu.current_device() == 0


def test_an_event_orders_two_streams():
    first, second = torch.emu.Stream(), torch.emu.Stream()
    x = torch.zeros(4, device="emu")
    torch.emu.synchronize()
    with torch.emu.stream(first):
        stall = torch.emu._stall()
        x.add_(5)
        done = torch.emu.Event()
        done.record()
    second.wait_event(done.event)
    with torch.emu.stream(second):
        y = x * 2  # after the add on `first`, whatever the threads do
        finished = torch.emu.Event()
        finished.record()
    assert not finished.query()
    stall.release()
    finished.synchronize()
    assert torch.equal(y.cpu(), torch.full((4,), 10.0))


def test_event_wait_and_timing():
    start = torch.emu.Event(enable_timing=True)
    end = torch.emu.Event(enable_timing=True)
    start.record()
    torch.emu._sleep(5)
    end.record()
    end.wait(torch.emu.Stream())  # another stream waits for it
    end.synchronize()
    assert start.elapsed_time(end) >= 5
    with pytest.raises((RuntimeError, ValueError), match="enable_timing"):
        plain = torch.emu.Event()
        plain.record()
        plain.synchronize()
        start.elapsed_time(plain)


def test_a_forked_child_cannot_use_the_device():
    result = run_python("""
        import os, torch, dicp.emu
        (torch.ones(2, device="emu") * 2).cpu()        # the parent's streams are running
        pid = os.fork()
        if pid == 0:
            torch.manual_seed(0)                        # leaves the device alone
            try:
                torch.ones(2, device="emu") * 2
            except RuntimeError as error:
                print("child:", torch.emu._is_in_bad_fork(), str(error).splitlines()[0])
            os._exit(0)
        os.waitpid(pid, 0)
        print("parent:", torch.emu._is_in_bad_fork(), (torch.ones(2, device="emu") * 2).tolist())
    """)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "child: True emu: the emulated device cannot be used in a forked child" in result.stdout
    assert "parent: False [2.0, 2.0]" in result.stdout

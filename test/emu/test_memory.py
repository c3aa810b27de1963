"""The caching allocator's statistics show leaks and peak use."""

import gc

import torch

MB = 1 << 20


def training_step():
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)
    ).to("emu")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    data, target = torch.randn(32, 64, device="emu"), torch.randint(0, 10, (32,), device="emu")
    loss = torch.nn.functional.cross_entropy(model(data), target)
    loss.backward()
    optimizer.step()
    return model, optimizer, loss


def settled_allocated():
    """Bytes allocated once earlier tests' garbage is collected and queued work has run."""
    gc.collect()
    torch.emu.synchronize()
    return torch.emu.memory_allocated()


def test_a_training_step_gives_back_all_its_memory():
    baseline = settled_allocated()
    torch.emu.reset_peak_memory_stats()
    state = training_step()
    torch.emu.synchronize()
    assert torch.emu.memory_allocated() > baseline  # parameters, Adam's moments
    assert torch.emu.max_memory_allocated() > torch.emu.memory_allocated()  # activations
    del state
    assert settled_allocated() == baseline  # tasks release what they hold


def test_a_leak_shows():
    baseline = settled_allocated()
    leaked = training_step()[0]  # the model is kept
    assert settled_allocated() > baseline
    del leaked


def test_peak_statistics_reset():
    torch.emu.reset_peak_memory_stats()
    before = torch.emu.max_memory_allocated()
    big = torch.empty(4 * MB, dtype=torch.uint8, device="emu")
    assert torch.emu.max_memory_allocated() >= before + 4 * MB
    del big
    torch.emu.synchronize()
    assert torch.emu.max_memory_allocated() >= before + 4 * MB  # the peak stays
    torch.emu.reset_peak_memory_stats()
    assert torch.emu.max_memory_allocated() == torch.emu.memory_allocated()


def test_freed_blocks_are_cached_and_reused_then_released():
    torch.emu.empty_cache()
    first = torch.empty(MB, dtype=torch.uint8, device="emu")
    address = first.data_ptr()
    del first
    assert torch.emu.memory_reserved() >= MB  # cached, not unmapped
    second = torch.empty(MB, dtype=torch.uint8, device="emu")
    assert second.data_ptr() == address  # the cached block again
    del second
    torch.emu.empty_cache()
    assert torch.emu.memory_reserved() == torch.emu.memory_allocated()


def test_each_device_keeps_its_own_statistics():
    torch.emu.synchronize(1)
    before = (torch.emu.memory_allocated(0), torch.emu.memory_allocated(1))
    x = torch.empty(MB, dtype=torch.uint8, device="emu:1")
    assert torch.emu.memory_allocated(1) >= before[1] + MB
    assert torch.emu.memory_allocated(0) == before[0]
    del x


# Compiled circular padding, as g++ -O3 vectorizes it here, loads a whole vector of each row
# of the input and blends away the lanes outside it: its first load reads 4 bytes before the
# input. Blocks mapped after the input's lie just below it, closed.
STRADDLING_LOAD = """
    import torch, torch.nn.functional as F
    import dicp.emu
    host = torch.randn(3, 4, 5, 6)
    x = host.to("emu")
    neighbours = [torch.empty(1000 + 1000 * i, device="emu") for i in range(16)]
    pad = torch.compile(lambda x: F.pad(x, (1, 1, 1, 1, 1, 1), mode="circular"),
                        backend="emugraph")
    got = pad(x).cpu()
    assert torch.equal(got, F.pad(host, (1, 1, 1, 1, 1, 1), mode="circular"))
    print("ok")
"""


def test_a_vector_load_straddling_a_blocks_first_byte_does_not_fault():
    from .conftest import run_python

    result = run_python(STRADDLING_LOAD)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-2000:]


def test_memory_queued_work_still_reads_is_free_at_once_for_its_stream():
    """As in a CUDA caching allocator: a tensor the host frees while queued work still reads it
    stops counting at once, and the next allocation on that stream may take its memory (its
    work runs after the reads); another stream's allocation may not before they have run."""
    settled_allocated()
    torch.emu.empty_cache()
    x, ones = torch.ones(MB // 4, device="emu"), torch.ones(MB // 4, device="emu")
    address = x.data_ptr()
    stall = torch.emu._stall()
    y = x * 2  # queued behind the stall, reads x
    before = torch.emu.memory_allocated()
    del x
    assert torch.emu.memory_allocated() == before - MB
    with torch.emu.stream(torch.emu.Stream()):
        elsewhere = torch.empty(MB, dtype=torch.uint8, device="emu")
    assert elsewhere.data_ptr() != address
    zeros = ones * 0  # written after y's kernel read x
    assert zeros.data_ptr() == address
    stall.release()
    assert torch.equal(y.cpu(), torch.full((MB // 4,), 2.0))
    assert torch.equal(zeros.cpu(), torch.zeros(MB // 4))

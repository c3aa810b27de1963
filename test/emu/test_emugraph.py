"""emugraph: graphs compiled for emu take, allocate and return emu tensors, launch their kernels
on the current stream and return without waiting. Every result is compared with eager on the
CPU. As in test_asynchrony.py, no clock decides a verdict: `torch.emu._stall()` holds the
stream, so what is queued behind it provably has not run when the host looks.
"""

import copy
import threading

import pytest
import torch

from dicp import config

from ..common.shared_builds import share_runtime_builds
from ..common.tolerance import assert_close
from .conftest import compiled, on_emu

pytestmark = pytest.mark.usefixtures("fresh_dynamo")
SIZES = [1, 7, 8]  # one element, odd, even


def fused(x, w):
    """Pointwise chains, a reduction with its consumers (softmax) and a product."""
    return torch.softmax(torch.tanh(x * 2 + 1) @ w, dim=-1).sum(0), (x - x.mean()).relu()


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_inference_matches_cpu_eager_on_every_size(dynamic):
    fn = compiled(fused, dynamic)
    for n in SIZES:
        x, w = torch.randn(n, 5), torch.randn(5, 3)
        outputs = fn(*on_emu(x, w))
        assert all(o.device.type == "emu" for o in outputs)
        for got, want in zip(outputs, fused(x, w)):
            torch.testing.assert_close(got.cpu(), want)


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(6, 8), torch.nn.LayerNorm(8), torch.nn.GELU(), torch.nn.Linear(8, 3)
    )


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_training_gradients_match_cpu_eager(dynamic):
    host = mlp()
    device = copy.deepcopy(host).to("emu")
    step = compiled(device, dynamic)
    for n in SIZES:
        x = torch.randn(n, 6)
        out = step(x.to("emu"))
        out.square().sum().backward()
        host(x).square().sum().backward()
        torch.testing.assert_close(out.cpu(), host(x), atol=1e-5, rtol=1e-5)
        for got, want in zip(device.parameters(), host.parameters()):
            assert got.grad.device.type == "emu"
            torch.testing.assert_close(got.grad.cpu(), want.grad, atol=1e-5, rtol=1e-5)
            got.grad, want.grad = None, None


aten = torch.ops.aten
# Ops whose torch decomposition depends on the device type (the saved statistics' shape and
# dtype): on emu, whose eager ops are the CPU's, a compiled graph must give the CPU's.
DEVICE_DEPENDENT_DECOMPOSITIONS = {
    "batch_norm_eval": lambda x, w, b, m, v: aten.native_batch_norm(
        x, w, b, m, v, False, 0.1, 1e-5
    ),
    "batch_norm_train": lambda x, w, b, m, v: aten.native_batch_norm(
        x, w, b, m.clone(), v.clone(), True, 0.1, 1e-5
    ),
    "legit_no_training": lambda x, w, b, m, v: aten._native_batch_norm_legit_no_training(
        x, w, b, m, v, 0.1, 1e-5
    ),
    "legit_no_stats": lambda x, w, b, m, v: aten._native_batch_norm_legit(x, w, b, True, 0.1, 1e-5),
    "layer_norm": lambda x, w, b, m, v: aten.native_layer_norm(x, [3], w, b, 1e-5),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", sorted(DEVICE_DEPENDENT_DECOMPOSITIONS))
def test_device_dependent_decompositions_give_the_cpu_results(name, dtype):
    fn = DEVICE_DEPENDENT_DECOMPOSITIONS[name]
    x, w, b, mean = (torch.randn(shape, dtype=dtype) for shape in [(5, 3, 3), 3, 3, 3])
    var = torch.rand(3, dtype=dtype) + 0.5
    outputs = compiled(fn)(*on_emu(x, w, b, mean, var))
    exact = fn(*(t.double() for t in (x, w, b, mean, var)))
    for got, want, reference in zip(outputs, fn(x, w, b, mean, var), exact, strict=True):
        assert_close(got, want, reference=reference)  # shape and dtype first


def hamming(**device):
    return torch.signal.windows.general_hamming(5, sym=True, alpha=0.54, **device)


# Graphs without tensor inputs: a host constant (the window's coefficients) feeds the ops of
# its factories, which then stay on the host, as does the graph (OpInfo general_hamming).
NO_TENSOR_INPUTS = {
    "on_emu": lambda: hamming(device="emu"),
    "on_cpu": lambda: hamming(device="cpu"),
    "default_device": lambda: hamming(),
}


@pytest.mark.parametrize("name", sorted(NO_TENSOR_INPUTS))
def test_a_graph_without_tensor_inputs_makes_tensors_where_the_program_says(name):
    fn = NO_TENSOR_INPUTS[name]
    got, want = compiled(fn)(), fn()
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    for g, w in zip(got, want, strict=True):
        assert g.device == w.device
        torch.testing.assert_close(g.cpu(), w.cpu())


# A factory naming the host keeps it, as in eager; so do the factories of a graph with tensor
# inputs that name no device (eager makes them on the host).
HOST_FACTORIES = {
    "named_host_beside_device_input": lambda x, n: (x * 2, torch.arange(4, device="cpu") * n),
    "unnamed_beside_device_input": lambda x, n: (x + 1, torch.ones(3) * n),
    "named_host_without_tensor_inputs": lambda x, n: torch.ones(3, device="cpu") * n,
    "named_host_and_unnamed": lambda x, n: (torch.zeros(2), torch.full((2,), 1.0, device="cpu")),
    "unnamed_moved_to_the_device_and_back": lambda x, n: torch.zeros(3).cpu() + n,
}


@pytest.mark.parametrize("name", sorted(HOST_FACTORIES))
def test_factories_naming_the_host_or_beside_device_inputs_stay_there(name):
    fn = HOST_FACTORIES[name]
    x = torch.randn(3)
    args = (x.to("emu"), 2) if "device_input" in name else (2,)
    call = (lambda n: fn(None, n)) if len(args) == 1 else fn
    got, want = compiled(call)(*args), call(*args)
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    for g, w in zip(got, want, strict=True):
        assert g.device == w.device
        torch.testing.assert_close(g.cpu(), w.cpu())


def released_later(stall):
    """Release `stall` from another thread shortly; the returned flag is set first."""
    released = threading.Event()

    def release():
        released.set()
        stall.release()

    threading.Timer(0.2, release).start()
    return released


def test_a_compiled_call_returns_before_its_kernels_run():
    fn = compiled(lambda x: (x * 2 + 1).sum())
    x = torch.arange(6.0, device="emu")
    fn(x)  # compiled (and run) before the stream is held
    stall = torch.emu._stall()
    start, end = torch.emu.Event(), torch.emu.Event()
    start.record()
    total = fn(x)
    end.record()
    assert not end.query()  # the call came back; its kernels are still queued
    stall.release()
    end.synchronize()
    assert total.item() == 36.0


def test_a_compiled_call_does_not_wait_for_earlier_work():
    """The call returns while the stream is held: it waited for nothing. Had it waited, the
    stall would end only by failing (timeout), raising at the next wait."""
    fn = compiled(lambda x: torch.softmax(x, -1) * 3)
    x = torch.randn(4, 5)
    device_x = x.to("emu")  # a copy from pageable host memory waits: before the stall
    fn(device_x)
    stall = torch.emu._stall(timeout=60)
    released = released_later(stall)
    y = fn(device_x)
    assert not released.is_set()
    torch.testing.assert_close(y.cpu(), torch.softmax(x, -1) * 3)
    assert released.is_set()  # the host read waited for the stream


def test_kernels_read_inputs_after_their_producers_on_the_stream():
    """An input still being computed (queued behind a stall) is read by the compiled kernels
    only after it is written: the launch is ordered on the stream, not run by the host."""
    fn = compiled(lambda x: torch.exp(x) + x.sum())
    x = torch.randn(7)
    fn(x.to("emu"))
    device_x = x.to("emu")
    stall = torch.emu._stall()
    produced = device_x * 3  # queued behind the stall
    y = fn(produced)
    stall.release()
    torch.testing.assert_close(y.cpu(), torch.exp(x * 3) + (x * 3).sum())


def test_streams_ordered_by_an_event_give_the_right_result():
    fn = compiled(lambda x: x * 2 + 1)
    producer = torch.emu.Stream()
    x = torch.zeros(5, device="emu")
    fn(x)
    torch.emu.synchronize()
    with torch.emu.stream(producer):
        stall = torch.emu._stall()
        x.fill_(3.0)
        filled = torch.emu.Event()
        filled.record()
    torch.emu.current_stream().wait_event(filled.event)
    y = fn(x)
    stall.release()
    assert torch.equal(y.cpu(), torch.full((5,), 7.0))


@pytest.mark.parametrize("wait", ["wait_event", "wait_stream"])
def test_two_streams_without_the_event_can_be_shown_to_race(wait):
    """The main stream's fill of x is held behind a stall while a compiled call on a side
    stream reads x. Without a wait the call runs and reads the stale zeros (the device is
    really asynchronous, and the graph waits for nothing); after `wait_event` on the fill's
    event (or `wait_stream` on the main stream) the same call waits and reads the fill."""
    fn = compiled(lambda x: x * 2 + 1)
    x = torch.zeros(5, device="emu")
    fn(x)
    torch.emu.synchronize()
    main, side = torch.emu.current_stream(), torch.emu.Stream()
    stall = torch.emu._stall()
    x.fill_(3.0)  # held behind the stall
    filled = torch.emu.Event()
    filled.record()
    with torch.emu.stream(side):
        raced = fn(x)
        read = torch.emu.Event()
        read.record()
        read.synchronize()  # it has run, while the fill is still held
        if wait == "wait_event":
            side.wait_event(filled.event)
        else:
            side.wait_stream(main)
        ordered = fn(x)
    assert not side.query()  # the ordered call waits for the fill
    stall.release()
    torch.emu.synchronize()
    assert torch.equal(raced.cpu(), torch.ones(5))  # x read before the fill
    assert torch.equal(ordered.cpu(), torch.full((5,), 7.0))


def test_a_compiled_call_on_a_side_stream_runs_there():
    fn = compiled(lambda x: x + 1)
    x = torch.ones(3, device="emu")
    fn(x)
    torch.emu.synchronize()  # the default stream idle before the side stream's call
    side = torch.emu.Stream()
    with torch.emu.stream(side):
        stall = torch.emu._stall()
        y = fn(x)
    assert torch.emu.current_stream().query()  # the default stream has nothing queued
    assert not side.query()
    stall.release()
    side.synchronize()
    assert torch.equal(y.cpu(), torch.full((3,), 2.0))


def test_input_mutation_writes_the_emu_input():
    def fn(x, y):
        x.add_(y)
        return x * 2

    x, y = torch.randn(6), torch.randn(6)
    device_x = x.to("emu")
    out = compiled(fn)(device_x, y.to("emu"))
    expected = x.clone()
    torch.testing.assert_close(out.cpu(), fn(expected, y))
    torch.testing.assert_close(device_x.cpu(), expected)


def test_data_dependent_sizes_and_item_wait_for_the_device():
    def fn(x):
        return x[x > 0].sum() * x.max().item()

    x = torch.randn(9)
    out = compiled(fn)(x.to("emu"))
    torch.testing.assert_close(out.cpu(), fn(x))


def test_dropout_draws_from_the_emu_generator():
    fn = compiled(lambda x: torch.nn.functional.dropout(x, 0.5, training=True))
    x = torch.ones(64, device="emu")
    torch.manual_seed(3)
    first = fn(x).cpu()
    torch.manual_seed(3)
    second = fn(x).cpu()
    assert torch.equal(first, second)  # a seeded run reproduces itself
    assert set(first.tolist()) <= {0.0, 2.0} and 0 < first.count_nonzero() < 64


def test_a_cpu_constant_is_moved_to_emu():
    table = torch.arange(5.0)

    def fn(x):
        return x + table.to(x.device) * 2

    x = torch.randn(5)
    torch.testing.assert_close(compiled(fn)(x.to("emu")).cpu(), fn(x))


def test_strict_device_mode_names_the_node_making_a_host_tensor(monkeypatch):
    monkeypatch.setenv("DICP_EMUGRAPH_STRICT_DEVICE", "1")
    monkeypatch.setenv("DICP_CACHE_DIR", str(config.cache_dir / "strict-device"))

    def fn(x):
        host = torch.ones(3, device="emu").cpu() + 1  # a host intermediate no argument asks for
        return x + host.to("emu")

    with pytest.raises(Exception, match="node .* would make a host tensor"):
        compiled(fn)(torch.randn(3, device="emu"))


def test_strict_device_mode_takes_a_host_scalar_as_eager_does(monkeypatch):
    """A 0-dim host tensor is a scalar to torch on any device (eager makes this one too)."""
    monkeypatch.setenv("DICP_EMUGRAPH_STRICT_DEVICE", "1")
    monkeypatch.setenv("DICP_CACHE_DIR", str(config.cache_dir / "strict-device"))

    def fn(x):
        return torch.where(x > 0, x, torch.tensor(0.5)) * torch.tensor(2.0)

    x = torch.randn(7)
    torch.testing.assert_close(compiled(fn)(x.to("emu")).cpu(), fn(x))


def cumsum_then_product(x, w):
    return (torch.sin(x).cumsum(0) * 2) @ w


def ancestors(event):
    while event.cpu_parent is not None:
        event = event.cpu_parent
        yield event.name


def test_an_eager_fallback_shows_its_copies_in_the_dump_and_the_profile(monkeypatch, tmp_path):
    """The graph leaves cumsum to eager (DICP_FALLBACK_OPS), and emu has no kernel for it: the
    device's fallback copies its input to the host, runs it there and copies the result back.
    The debug dump's wrapper says so before the call, and under DICP_PROFILE_KERNELS the call's
    range holds the fallback's copies by name; the product, a native op, has no copies."""
    cache = share_runtime_builds(tmp_path / "cache")
    for knob, value in {
        "DICP_CACHE_DIR": str(cache),
        "DICP_DEBUG": "1",
        "DICP_PROFILE_KERNELS": "1",
        "DICP_FALLBACK_OPS": "aten.cumsum.default",
    }.items():
        monkeypatch.setenv(knob, value)
    x, w = torch.randn(6, 4), torch.randn(4, 3)
    fn = compiled(cumsum_then_product)
    fn(*on_emu(x, w))
    with torch.profiler.profile() as profile:
        y = fn(*on_emu(x, w))
        torch.emu.synchronize()
    torch.testing.assert_close(y.cpu(), cumsum_then_product(x, w))

    (wrapper,) = cache.glob("debug/*/wrapper.py")
    assert (
        "# aten.cumsum.default runs on the CPU through emu:0's fallback: inputs copied "
        "emu:0 -> cpu, the op run on the CPU, results copied cpu -> emu:0\n"
        "    with record_function(" in wrapper.read_text()
    )
    assert "# aten.mm.default runs on emu:0: the device's kernel" in wrapper.read_text()
    events = {event.name: event for event in profile.events()}
    (call,) = [
        name
        for name in events
        if name.endswith(" eager torch.ops.aten.cumsum.default aten.cumsum.default")
    ]
    for stage in ("copy emu:0 -> cpu", "on the CPU", "copy cpu -> emu:0"):
        assert call in ancestors(events[f"dicp.emu fallback aten::cumsum: {stage}"])
    assert not [name for name in events if name.startswith("dicp.emu fallback aten::mm")]


def test_training_steps_hold_device_memory_flat():
    model = mlp().to("emu")
    step = compiled(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, 6, device="emu")

    def train():
        optimizer.zero_grad(set_to_none=True)
        step(x).square().sum().backward()
        optimizer.step()

    for _ in range(2):
        train()
    torch.emu.synchronize()
    before = torch.emu.memory_allocated()
    for _ in range(3):
        train()
    torch.emu.synchronize()
    assert torch.emu.memory_allocated() == before

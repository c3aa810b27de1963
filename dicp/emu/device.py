"""torch.emu: the emulated device's module, shaped like torch.cuda.

Devices, the current device and its guard; streams, the current stream and the `stream(s)`
context; events; random number generators per device; memory statistics of the caching
allocator. `_stall` and `_sleep` enqueue device work of a known shape for tests and benchmarks.
"""

import contextlib

import torch

from . import _runtime

_C = _runtime.module()


def is_available() -> bool:
    return True


def is_initialized() -> bool:
    return True


def _lazy_init() -> None:
    """Nothing to initialize lazily: `import dicp.emu` set the device up."""


def _is_in_bad_fork() -> bool:
    """In a child forked from a process that used the device: its stream threads are gone
    (torch.manual_seed then leaves the device alone; device work raises)."""
    return _C.in_forked_child()


def device_count() -> int:
    return _C.device_count()


def current_device() -> int:
    return _C.current_device()


def _index(device, optional: bool = False) -> int:
    """The device index of an int, "emu:1", torch.device or None (the current device)."""
    if device is None:
        return -1 if optional else current_device()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != "emu":
        raise ValueError(f"expected an emu device, got {device}")
    return current_device() if device.index is None else device.index


def set_device(device) -> None:
    index = _index(device)
    if index >= 0:
        _C.set_device(index)


class device:
    """Context manager making `device` the current device (a no-op for None)."""

    def __init__(self, device):
        self.index = _index(device, optional=True)
        self.previous = -1

    def __enter__(self):
        self.previous = current_device()
        if self.index >= 0:
            _C.set_device(self.index)

    def __exit__(self, *exc):
        _C.set_device(self.previous)
        return False


def synchronize(device=None) -> None:
    """Wait for all work enqueued on every stream of `device`."""
    _C.synchronize(_index(device))


# ---- streams and events: torch's device-generic Stream and Event on the emu guard ----


class Stream(torch.Stream):
    """A new stream of `device` (the current device by default), with its own worker."""

    def __new__(cls, device=None, priority: int = 0, **kwargs):
        if kwargs:  # torch rebuilds streams from (stream_id, device_index, device_type)
            return super().__new__(cls, priority=priority, **kwargs)
        return super().__new__(cls, device=torch.device("emu", _index(device)), priority=priority)


class Event:
    """An event of an emu device (the current one by default): record it on a stream, make
    another stream wait for it, query or synchronize it; `enable_timing=True` for
    elapsed_time. It wraps torch.Event, whose elapsed_time accepts torch.Event only."""

    def __init__(
        self,
        enable_timing: bool = False,
        blocking: bool = False,
        interprocess: bool = False,
        device=None,
    ):
        self.event = torch.Event(
            device=torch.device("emu", _index(device)),
            enable_timing=enable_timing,
            blocking=blocking,
            interprocess=interprocess,
        )

    def record(self, stream=None) -> None:
        self.event.record(stream)

    def wait(self, stream=None) -> None:
        self.event.wait(stream)

    def query(self) -> bool:
        return self.event.query()

    def synchronize(self) -> None:
        self.event.synchronize()

    def elapsed_time(self, end) -> float:
        """Milliseconds between this event and `end`, both recorded and completed."""
        return self.event.elapsed_time(end.event if isinstance(end, Event) else end)


def current_stream(device=None) -> torch.Stream:
    return _C.current_stream(_index(device))


def default_stream(device=None) -> torch.Stream:
    return _C.default_stream(_index(device))


def set_stream(stream: torch.Stream) -> None:
    if stream is not None:
        _C.set_stream(stream)


@contextlib.contextmanager
def stream(stream):
    """Make `stream` current (and its device the current device) inside the block."""
    if stream is None:
        yield
        return
    previous_device = current_device()
    previous_stream = current_stream(stream.device_index)
    _C.set_device(stream.device_index)
    _C.set_stream(stream)
    try:
        yield
    finally:
        _C.set_stream(previous_stream)
        _C.set_device(previous_device)


# ---- random numbers: one generator per device ----

default_generators = tuple(_C.default_generator(i) for i in range(device_count()))


def manual_seed(seed: int) -> None:
    default_generators[current_device()].manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for generator in default_generators:
        generator.manual_seed(int(seed))


def seed() -> None:
    default_generators[current_device()].seed()


def seed_all() -> None:
    for generator in default_generators:
        generator.seed()


def initial_seed() -> int:
    return default_generators[current_device()].initial_seed()


def get_rng_state(device="emu") -> torch.Tensor:
    return default_generators[_index(device)].get_state()


def set_rng_state(new_state: torch.Tensor, device="emu") -> None:
    default_generators[_index(device)].set_state(new_state)


def get_rng_state_all() -> list:
    return [generator.get_state() for generator in default_generators]


def set_rng_state_all(new_states) -> None:
    for generator, state in zip(default_generators, new_states):
        generator.set_state(state)


# ---- memory of the caching allocator ----


def memory_stats(device=None) -> dict:
    """allocated_bytes, peak_allocated_bytes, reserved_bytes (allocated + cached), allocations."""
    return _C.memory_stats(_index(device))


def memory_allocated(device=None) -> int:
    return memory_stats(device)["allocated_bytes"]


def max_memory_allocated(device=None) -> int:
    return memory_stats(device)["peak_allocated_bytes"]


def memory_reserved(device=None) -> int:
    return memory_stats(device)["reserved_bytes"]


def reset_peak_memory_stats(device=None) -> None:
    _C.reset_peak(_index(device))


def empty_cache() -> None:
    """Unmap the cached free blocks of every device."""
    _C.empty_cache()


# ---- device work of a known shape, for tests and benchmarks ----


def _stall(device=None, timeout: float = 120.0):
    """Hold the current stream of `device` until `.release()` (it fails after `timeout` s):
    work enqueued behind it provably has not run yet."""
    return _C.stall(_index(device), timeout)


def _sleep(ms: float, device=None) -> None:
    """A kernel that keeps the current stream busy for `ms` milliseconds."""
    _C.sleep(_index(device), ms)


# ---- kernel launch: the driver call a compiler's generated code makes ----


def launch(kernel: int, tensors, integers) -> None:
    """Enqueue compiled kernel `kernel` (the address of a C function
    `void k(void* const* pointers, const int64_t* integers)`) on the current stream of the
    device of `tensors`, and return at once. The stream passes the kernel the data pointers of
    `tensors` (emu tensors of one device, their memory kept until it ran) and `integers` (sizes)."""
    _C.launch(kernel, tensors, [int(i) for i in integers])

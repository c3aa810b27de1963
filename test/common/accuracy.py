"""Float64 references: what a computation gives with (nearly) exact arithmetic.

Eager PyTorch rounds every op to its dtype, so where a compiled result legitimately differs from
eager (a reduction in another order, a fused chain keeping float intermediates) the arbiter is
the same computation run in float64. `float64_run(fn, *args)` is that run; `assert_close(...,
reference=)` in tolerance.py uses it.

Op tests in DICP's format compare `compiled_model.model(...)` with `model(...)`, the test module's
eager `OpModule`. For an op test the harness (test/common/harness.py) calls that `model` through
`EagerCalls`, which keeps a copy of each call's inputs, so `assert_close(dicp_res, res)` can ask
for the float64 reference of an eager output `res` without any change to the test file.
"""

import contextlib

import torch

# Dtypes whose reference is computed in the wider type.
_WIDER = {
    torch.float16: torch.float64,
    torch.bfloat16: torch.float64,
    torch.float32: torch.float64,
    torch.complex32: torch.complex128,
    torch.complex64: torch.complex128,
}


def tree_map(fn, value):
    """`fn` applied to every leaf of nested tuples, lists and dicts."""
    if isinstance(value, (tuple, list)):
        return type(value)(tree_map(fn, item) for item in value)
    if isinstance(value, dict):
        return {key: tree_map(fn, item) for key, item in value.items()}
    return fn(value)


def tree_leaves(value):
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in tree_leaves(item)]
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in tree_leaves(item)]
    return [value]


def _storage_copy(tensor, dtype):
    """A copy of `tensor` in `dtype` with its storage layout: same sizes, strides and offset
    into a copy of its whole storage (ops like as_strided read the storage, not the view)."""
    whole = torch.empty(0, dtype=tensor.dtype).set_(tensor.detach().untyped_storage())
    copy = whole.to(dtype, copy=True).as_strided(
        tensor.shape, tensor.stride(), tensor.storage_offset()
    )
    return copy.requires_grad_() if tensor.requires_grad else copy


def snapshot(value):
    """Inputs as they were before a call that may write to them."""
    if isinstance(value, torch.Tensor):
        return _storage_copy(value, value.dtype)
    return value


def widened(value):
    """Floating tensors in float64 (complex in complex128), in their storage layout."""
    if isinstance(value, torch.Tensor) and value.dtype in _WIDER:
        return _storage_copy(value, _WIDER[value.dtype])
    return value


def float64_run(fn, *args, **kwargs):
    """`fn` run on float64 copies of its floating tensor arguments: the reference that a
    compiled result and eager's are both measured against."""
    return fn(*tree_map(widened, args), **tree_map(widened, kwargs))


class EagerCalls:
    """An op test's eager module, called through a recorder: each call's inputs are copied
    first, so the float64 reference of any output can be computed after the test's asserts."""

    def __init__(self, model):
        self.model = model
        self._calls = []  # (args, kwargs) copied before each call, and its outputs
        self._where = {}  # id(output tensor) -> (call index, leaf index)
        self._references = {}  # call index -> float64 outputs

    def __call__(self, *args, **kwargs):
        inputs = tree_map(snapshot, (args, kwargs))
        outputs = self.model(*args, **kwargs)
        index = len(self._calls)
        self._calls.append((inputs, outputs))  # keeps outputs alive, so their ids stay unique
        for leaf_index, leaf in enumerate(tree_leaves(outputs)):
            if isinstance(leaf, torch.Tensor):
                self._where.setdefault(id(leaf), (index, leaf_index))
        return outputs

    def __getattr__(self, name):
        return getattr(self.model, name)

    def reference_for(self, output):
        """The float64 result matching eager output `output`, or None if it is not one."""
        where = self._where.get(id(output))
        if where is None:
            return None
        index, leaf_index = where
        if index not in self._references:
            (args, kwargs), _ = self._calls[index]
            self._references[index] = float64_run(self.model, *args, **kwargs)
        reference = tree_leaves(self._references[index])[leaf_index]
        return reference.detach() if isinstance(reference, torch.Tensor) else None


_active: list = []  # the EagerCalls of the running op test (at most one)


@contextlib.contextmanager
def recording_eager_calls(model):
    calls = EagerCalls(model)
    _active.append(calls)
    try:
        yield calls
    finally:
        _active.remove(calls)


def recorded_reference(output):
    """The float64 reference of an eager output recorded by the running op test, or None."""
    for calls in _active:
        reference = calls.reference_for(output)
        if reference is not None:
            return reference
    return None

"""new_backendgraph's first compile sets glibc's heap thresholds where glibc's own rule ends
(heap.py): a freed buffer's memory, taken again, is not faulted in again. Each case
runs in a fresh interpreter, since the thresholds are process-wide."""

import platform

import pytest

from .helpers import check_fresh

pytestmark = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc", reason="mallopt's thresholds are glibc's"
)

# Compile and run a graph, then take a 20 MB buffer, write it, free it, and take and write a
# 16 MB one: a fresh glibc maps the first itself (above its initial 128 KB threshold), frees it,
# grows its heap for the second and faults every page in; kept thresholds, none. The second is
# smaller so that it fits the freed block even where another thread's small block has landed
# just above it (the freed block is then not the heap's top, and torch's aligned allocation of
# the same size asks for a few bytes more than it holds: a suite under load failed so).
SECOND_BUFFER_FAULTS = """
    import resource
    import torch

    torch.compile(lambda x: x.sin() + 1, backend="new_backendgraph")(torch.randn(8))

    def written(count):
        return torch.empty(count, dtype=torch.uint8).fill_(1)

    written(20 << 20)  # freed at once
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    buffer = written(16 << 20)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def test_a_freed_buffer_is_taken_again_without_faulting(tmp_path):
    assert int(check_fresh(SECOND_BUFFER_FAULTS, tmp_path)) < 100


def test_the_knob_off_leaves_glibcs_thresholds(tmp_path):
    """The case above can fail: with the knob off, glibc's own start faults the pages in."""
    faults = check_fresh(SECOND_BUFFER_FAULTS, tmp_path, DICP_RETAIN_FREED_MEMORY="0")
    assert int(faults) > (16 << 20) // 4096 // 2

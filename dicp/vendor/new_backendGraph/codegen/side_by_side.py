"""Small independent kernels of a native entry, run by its threads side by side.

An optimizer's graph updates each parameter in a kernel of its own. A ResNet-style CNN's SGD
step makes 29, 27 of them below the work at which a kernel's loop goes parallel
(cpp_codegen.PARALLEL_THRESHOLD): one thread ran their 40,000 elements while the other
waited, 87 us a step against Inductor's 46, which runs the whole update in one parallel
region. A run of two or more consecutive such kernels, none touching memory another of them
writes, becomes one `SideBySide` step, which the entry runs as a parallel loop over its
kernels, the largest first, each taken by the next free thread (cpp_render). A kernel called
inside it runs on the one thread that took it (its own loop is below the threshold, and
OpenMP runs a nested region on one thread), and computes what it computed alone: nothing it
reads is written by another of the run.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class SideBySide:
    """Kernel steps (native_entry.KernelStep) that read nothing another writes, in any order
    or at once: the largest `work` first."""

    steps: tuple


@dataclass(frozen=True)
class Memory:
    """What a kernel argument's root is: the memory it names (`name`: an elided copy's buffer
    names its input's), and whether a kernel may write it while others run (`private`: new
    memory, or an input no other input shares, StoragesApart)."""

    name: str
    private: bool


def side_by_side(steps, parallel_work, memory_of):
    """`steps` (an entry's, in order) with each run of consecutive independent small kernels
    doing `parallel_work` elements or more together as one SideBySide. `memory_of(root)`:
    the root's Memory, or None where the entry cannot tell what else it may share memory
    with (a view Python made): a kernel on such a root runs alone."""
    result, run = [], []
    for step in steps:
        access = _access(step, memory_of)
        if access is None or any(_conflict(access, other) for _, other in run):
            _close(run, result, parallel_work)
        if access is None:
            result.append(step)
        else:
            run.append((step, access))
    _close(run, result, parallel_work)
    return result


def _close(run, result, parallel_work):
    steps = [step for step, _ in run]
    if len(steps) > 1 and sum(step.work for step in steps) >= parallel_work:
        result.append(SideBySide(tuple(sorted(steps, key=lambda step: -step.work))))
    else:
        result.extend(steps)
    run.clear()


def _access(step, memory_of):
    """(memory `step` writes, memory it reads or writes) for a small kernel on roots whose
    memory is known and, where written, private; None for any other step."""
    if getattr(step, "work", None) is None:
        return None
    written, touched = set(), set()
    for param, pointer in step.pointers:
        memory = memory_of(pointer.root)
        if memory is None or (param.writable and not memory.private):
            return None
        touched.add(memory.name)
        if param.writable:
            written.add(memory.name)
    return written, touched


def _conflict(a, b):
    return bool(a[0] & b[1] or b[0] & a[1])

"""Python side of DICP_BOUNDS_CHECK: the storage extents kernels check against, and the error;
and of the integer division by zero kernels record (always on), raised as ZeroDivisionError.

A kernel built with bounds checks gets, after its size arguments, each pointer's extent: the
elements of the tensor's storage before and after its data pointer, `[lo, hi)`. The first
access outside is recorded by the C++ runtime (dicp_runtime.h, `checked`), redirected to a
scratch element, and raised here as BoundsError once the kernel returns.
"""

import ctypes


class BoundsError(IndexError):
    """A generated kernel addressed memory outside a tensor's storage."""


def storage_extent(tensor):
    """(lo, hi): the elements of `tensor`'s storage around its data pointer."""
    offset = tensor.storage_offset()
    return -offset, tensor.untyped_storage().nbytes() // tensor.element_size() - offset


def error_reader(library):
    """The library's `dicp_bounds_error` (None when it was built without bounds checks)."""
    try:
        reader = library.dicp_bounds_error
    except AttributeError:
        return None
    reader.argtypes, reader.restype = [], ctypes.c_char_p
    return reader


def zero_division_reader(library):
    """The library's `dicp_zero_division`: whether an integer division by zero happened since
    the last call (dicp_runtime.h)."""
    reader = library.dicp_zero_division
    reader.argtypes, reader.restype = [], ctypes.c_int
    return reader


def checked(kernel, where, readers, zero_division=()):
    """`kernel` raising BoundsError after any call that accessed memory out of bounds, as
    any of `readers` (the libraries whose code it runs) recorded, and ZeroDivisionError (as
    eager does) after one that divided an integer by zero, as any of `zero_division` did."""

    def call(*args):
        kernel(*args)
        if any([reader() for reader in zero_division]):  # a list: every record is cleared
            raise ZeroDivisionError(f"{where}: integer division by zero")
        messages = [message for message in (reader() for reader in readers) if message]
        if messages:
            raise BoundsError(
                f"{where}: {messages[0].decode()} (a buffer's elements count "
                f"from its data pointer over its storage; DICP_DEBUG=1 dumps "
                f"the kernel source)"
            )

    return call

"""Python side of DICP_BOUNDS_CHECK: the storage extents kernels check against, and the error.

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


def checked(kernel, where, readers):
    """`kernel` raising BoundsError after any call that accessed memory out of bounds, as
    any of `readers` (the libraries whose code it runs) recorded."""
    def call(*args):
        kernel(*args)
        messages = [message for message in (reader() for reader in readers) if message]
        if messages:
            raise BoundsError(f"{where}: {messages[0].decode()} (a buffer's elements count "
                              f"from its data pointer over its storage; DICP_DEBUG=1 dumps "
                              f"the kernel source)")
    return call

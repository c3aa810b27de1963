"""Small shared helpers: op names and patterns, the dicp logger, atomic file writes. Knobs live
in dicp.config."""

import fnmatch
import logging
import os
import tempfile
from pathlib import Path

import torch

from .torch_compat import OpOverload

log = logging.getLogger("dicp")


def matches_any(op_name: str, patterns) -> bool:
    return any(fnmatch.fnmatchcase(op_name, pattern) for pattern in patterns)


def leaves(value, kind):
    """Every item of type `kind` in a value nested in lists and tuples (tuple outputs, args)."""
    if isinstance(value, kind):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from leaves(item, kind)


def is_random(target) -> bool:
    """An op that draws from torch's random number generator (torch tags it so)."""
    return torch.Tag.nondeterministic_seeded in getattr(target, "tags", ())


def opmath_dtype(dtype):
    """The type eager's CPU kernels compute `dtype` in: float32 for float16 and bfloat16."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def op_name(target) -> str:
    """`aten.add.Tensor` for an OpOverload, the vendor name for a vendor op."""
    if isinstance(target, OpOverload):
        return str(target)  # "aten.mm.default"; OpOverload.name() drops ".default"
    name = getattr(target, "name", None)
    return str(name if isinstance(name, str) else getattr(target, "__name__", target))


_logged_once: set = set()


def log_once(key, message: str, *args, level=logging.WARNING) -> None:
    if key not in _logged_once:
        _logged_once.add(key)
        log.log(level, message, *args)


def atomic_write(path: Path, data: bytes) -> None:
    """`data` at `path`, through a temp file in the same folder renamed into place: readers and
    concurrent writers (DDP ranks) never see a partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

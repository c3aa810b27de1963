"""Knobs (DICP_* environment variables, read when used) and small shared helpers."""
import fnmatch
import logging
import os
from pathlib import Path

import torch

log = logging.getLogger("dicp")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}


def env_flag(name: str, default: bool = False) -> bool:
    """A boolean knob: 1/true/yes/on or 0/false/no/off; anything else is an error."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"{name}={raw!r}: expected one of 1/true/yes/on or 0/false/no/off")


def env_list(name: str) -> list[str]:
    """A comma-separated knob, e.g. DICP_FALLBACK_OPS=aten.mm.*,aten.bmm.default."""
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


def matches_any(op_name: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(op_name, pattern) for pattern in patterns)


def op_name(target) -> str:
    """`aten.add.Tensor` for an OpOverload, the vendor name for a vendor op."""
    if isinstance(target, torch._ops.OpOverload):
        return str(target)  # "aten.mm.default"; OpOverload.name() drops ".default"
    name = getattr(target, "name", None)
    return str(name if isinstance(name, str) else getattr(target, "__name__", target))


def strict_mode() -> bool:
    return env_flag("DICP_STRICT")


def debug_mode() -> bool:
    return env_flag("DICP_DEBUG")


def cache_dir() -> Path:
    """DICP_CACHE_DIR, else the user's cache directory (XDG_CACHE_HOME or ~/.cache)."""
    configured = os.environ.get("DICP_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "dicp"


_logged_once: set = set()


def log_once(key, message: str, *args) -> None:
    if key not in _logged_once:
        _logged_once.add(key)
        log.warning(message, *args)

"""Names, layout and error handling shared by patch.py and unpatch.py.

Layout (relative to the repository root):
    hardware/<Vendor>_<Model>/<base>/<base>.patch            plain patch series
    hardware/<Vendor>_<Model>/<base>/<base>.patch.encrypted  AES-GCM sealed patch series
    tools/patch/hetero.txt                                   "<base>: A_X100 B_Y100" lines
where <base> is the first ABBREV_LEN hex digits of the base commit's full hash.
"""

import re
import sys
from pathlib import PurePosixPath

# Fixed length (not `git rev-parse --short`, which grows with the repository) so a folder name
# never changes once published.
ABBREV_LEN = 12

HARDWARE_DIR = "hardware"
HETERO_FILE = "tools/patch/hetero.txt"

# Patch bookkeeping is not part of what a patch changes: the patch series and the verification
# both cover every path except these.
EXCLUDED_PATHS = (HARDWARE_DIR, HETERO_FILE)
SOURCE_PATHSPEC = (".", *(f":(exclude){p}" for p in EXCLUDED_PATHS))

PLAIN_SUFFIX = ".patch"
ENCRYPTED_SUFFIX = ".patch.encrypted"

_DEVICE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9]*_[A-Za-z0-9]+$")


class PatchError(Exception):
    """A user-facing failure: the message says what went wrong and what to do."""


def run_main(main):
    """Run a tool's main(); user errors become `error: ...` on stderr and exit status 1."""
    try:
        main()
    except PatchError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)
    except OSError as err:  # e.g. an output or key directory that cannot be written
        print(f"error: {err}; check that path and its permissions", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("error: interrupted; temporary worktrees were removed", file=sys.stderr)
        sys.exit(130)


def validate_devices(names):
    """Check each name is <Vendor>_<Model> and that no device is listed twice."""
    for name in names:
        if not _DEVICE_RE.match(name):
            raise PatchError(
                f"invalid device type {name!r}: use <Vendor>_<Model> made of letters and "
                "digits, starting with a letter, e.g. A_X100"
            )
    if len(set(names)) != len(names):
        raise PatchError(f"device types {' '.join(names)} repeat a name; list each device once")
    return list(names)


def abbrev(commit):
    return commit[:ABBREV_LEN]


def patch_dir(device, base):
    """Folder (repository-relative, POSIX) holding `device`'s patch against full hash `base`."""
    return PurePosixPath(HARDWARE_DIR, device, abbrev(base))


def patch_paths(device, base):
    """(plain, encrypted) repository-relative paths of one device's patch for `base`."""
    folder = patch_dir(device, base)
    name = abbrev(base)
    return str(folder / (name + PLAIN_SUFFIX)), str(folder / (name + ENCRYPTED_SUFFIX))


def hetero_line(base, devices):
    return f"{abbrev(base)}: {' '.join(devices)}"


def parse_hetero_line(line):
    """Return (base_abbrev, [devices]) or None for blank and `#` comment lines."""
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    base, _, devices = text.partition(":")
    return base.strip(), devices.split()


def add_hetero_line(text, base, devices):
    """Append the line for (base, devices) unless an identical one exists; keeps order."""
    lines = text.splitlines()
    wanted = (abbrev(base), list(devices))
    if any(parse_hetero_line(line) == wanted for line in lines):
        return text if text.endswith("\n") or not text else text + "\n"
    return "".join(line + "\n" for line in [*lines, hetero_line(base, devices)])


def hetero_sets(text, base):
    """Device sets recorded in hetero.txt for `base` (full hash)."""
    entries = filter(None, map(parse_hetero_line, text.splitlines()))
    return [devices for name, devices in entries if name == abbrev(base)]

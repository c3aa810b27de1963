"""Build dicp for a chip (or a mix of chips) from the vendor patches in hardware/.

    python tools/patch/unpatch.py --device-type A_X100 [B_Y100 ...] --commit-id BASE \\
        [--dir build] [--key-path DIR]

With --dir, writes <dir>/<device>/dicp (BASE with the device's patch applied, a plain directory
tree) for each device. Without --dir, applies one device's patch to this clean checkout.
See docs/patches.md.
"""

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

# Keep the user's checkout free of tools/patch/__pycache__; must precede the local imports.
sys.dont_write_bytecode = True

from common import (
    HARDWARE_DIR,
    HETERO_FILE,
    PatchError,
    abbrev,
    hetero_sets,
    patch_paths,
    run_main,
    validate_devices,
)
from gitops import GitError, Repo, scratch_checkout
from sealing import KEY_FILE, checked_key_dir, load_key, unseal


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--device-type",
        nargs="+",
        required=True,
        metavar="VENDOR_MODEL",
        help="device(s) to build; several must match a line of " + HETERO_FILE,
    )
    parser.add_argument(
        "--commit-id",
        required=True,
        metavar="BASE",
        help="dicp commit the patches were made against",
    )
    parser.add_argument(
        "--dir",
        metavar="DIR",
        help="write DIR/<device>/dicp for each device (default: apply one "
        "device's patch to this checkout)",
    )
    parser.add_argument(
        "--key-path",
        metavar="DIR",
        help=f"directory holding the vendor's {KEY_FILE} for encrypted patches",
    )
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    repo = Repo.from_cwd()
    devices = validate_devices(args.device_type)
    if args.dir is None and len(devices) > 1:
        raise PatchError("several device types need separate trees; pass --dir, e.g. --dir build")
    base = repo.resolve_commit(args.commit_id, "--commit-id")
    if len(devices) > 1:
        require_hetero_entry(repo, base, devices)
    key_dir = checked_key_dir(repo, args.key_path) if args.key_path else None
    # Read (and decrypt, in memory) every patch before writing anything.
    series = {device: read_series(repo, device, base, key_dir) for device in devices}
    if args.dir is None:
        apply_in_place(repo, base, devices[0], series[devices[0]])
    else:
        build_trees(repo, base, Path(args.dir), series)


def require_hetero_entry(repo, base, devices):
    """A mix of devices must have been published together (order does not matter)."""
    path = repo.top / HETERO_FILE
    recorded = hetero_sets(path.read_text() if path.exists() else "", base)
    if sorted(devices) not in [sorted(found) for found in recorded]:
        known = "; ".join(" ".join(found) for found in recorded) or "none"
        raise PatchError(
            f"{' '.join(devices)} is not a heterogeneous set published for base {abbrev(base)} "
            f"in {HETERO_FILE} (recorded: {known}); use a recorded set, or build each device "
            "on its own"
        )


def read_series(repo, device, base, key_dir):
    """The device's patch series as bytes, decrypted in memory when sealed."""
    plain, sealed = patch_paths(device, base)
    if (repo.top / plain).exists() and (repo.top / sealed).exists():
        raise PatchError(f"both {plain} and {sealed} exist; delete the stale one")
    if (repo.top / plain).exists():
        return (repo.top / plain).read_bytes()
    if not (repo.top / sealed).exists():
        raise PatchError(missing_patch_message(repo, device, base, plain))
    if key_dir is None:
        raise PatchError(
            f"{sealed} is encrypted; pass --key-path DIR with the vendor's {KEY_FILE} in DIR"
        )
    return unseal((repo.top / sealed).read_bytes(), load_key(key_dir), device, base, sealed)


def missing_patch_message(repo, device, base, plain):
    device_dir = repo.top / HARDWARE_DIR / device
    if not device_dir.is_dir():
        return (
            f"no {HARDWARE_DIR}/{device}/ in {repo.top}; check out the branch that carries "
            f"the {device} patch"
        )
    bases = sorted(entry.name for entry in device_dir.iterdir() if entry.is_dir())
    return (
        f"no patch for {device} at base {abbrev(base)} (expected {plain}); "
        f"{device} has patches for: {', '.join(bases) or 'no base'}"
    )


def apply_patch(scratch, mbox, device, base):
    try:
        scratch.apply_series(mbox, patch_paths(device, base)[0])
    except PatchError as err:
        raise PatchError(
            f"{err}. The file is damaged or was made against another commit "
            f"than {abbrev(base)}: check --commit-id, or check the file out "
            "again"
        ) from None


def apply_in_place(repo, base, device, mbox):
    """Apply to this checkout, which must be BASE's sources with no local changes."""
    repo.require_clean("in-place unpatch writes into your working tree")
    head = repo.resolve_commit("HEAD", "HEAD")
    if repo.source_differences(base, head):
        raise PatchError(
            f"this checkout ({abbrev(head)}) is not dicp {abbrev(base)} outside "
            f"{HARDWARE_DIR}/; check out {abbrev(base)} or the patch's branch, or "
            "pass --dir build to get a separate tree"
        )
    where = patch_paths(device, base)[0]
    with scratch_checkout(repo, base) as scratch:
        apply_patch(scratch, mbox, device, base)
        # One combined diff applies cleanly to BASE even when the series renames then edits.
        diff = scratch.run("diff-tree", "-p", "--binary", "--full-index", base, scratch.tree())
    try:
        repo.run("apply", "--whitespace=nowarn", input=diff)
    except GitError as err:
        raise PatchError(
            f"cannot apply {where} in place: {err.detail}; move those files away "
            "or pass --dir build"
        ) from None
    print(
        f"applied the {device} patch for {abbrev(base)} to {repo.top}; "
        "`git status` lists the changes"
    )


def build_trees(repo, base, out_dir, series):
    """Build every tree in a temporary sibling, then swap each into <dir>/<device>/dicp."""
    stages = []
    try:
        for device, mbox in series.items():
            (out_dir / device).mkdir(parents=True, exist_ok=True)
            stages.append(Path(tempfile.mkdtemp(prefix=".dicp-new-", dir=out_dir / device)))
            with scratch_checkout(repo, base, keep_at=stages[-1] / "dicp") as scratch:
                apply_patch(scratch, mbox, device, base)
        for stage in stages:
            swap_into_place(stage)
    finally:
        for stage in stages:
            shutil.rmtree(stage, ignore_errors=True)
            _remove_if_empty(stage.parent)
    for device in series:
        print(f"wrote {out_dir / device / 'dicp'} (dicp {abbrev(base)} + {device} patch)")


def swap_into_place(stage):
    """Replace <device>/dicp by stage/dicp; the old tree goes into stage to be deleted."""
    final = stage.parent / "dicp"
    if final.exists() or final.is_symlink():
        os.rename(final, stage / "old")
    os.rename(stage / "dicp", final)


def _remove_if_empty(directory):
    # A failed first build must not leave an empty <dir>/<device>/ behind.
    try:
        directory.rmdir()
    except OSError:
        pass


if __name__ == "__main__":
    run_main(main)

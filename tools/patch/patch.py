"""Publish a vendor's adaptation of dicp as a patch against a known dicp commit.

    python tools/patch/patch.py --device-type A_X100 [B_Y100 ...] --base-commit-id BASE \\
        [--current-commit-id CUR] [--key-path DIR]

Writes hardware/<device>/<base>/<base>.patch (or .patch.encrypted) on a new branch made from
BASE and prints the branch name. See docs/patches.md.
"""

import argparse
import itertools
import sys

# Keep the user's checkout free of tools/patch/__pycache__; must precede the local imports.
sys.dont_write_bytecode = True

from common import (
    EXCLUDED_PATHS,
    HARDWARE_DIR,
    HETERO_FILE,
    PatchError,
    abbrev,
    add_hetero_line,
    hetero_line,
    patch_dir,
    patch_paths,
    run_main,
    validate_devices,
)
from gitops import Repo, scratch_checkout
from sealing import KEY_FILE, checked_key_dir, load_or_create_key, seal


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--device-type",
        nargs="+",
        required=True,
        metavar="VENDOR_MODEL",
        help="device being adapted; with several, the last one is adapted and "
        "the earlier ones must already have a patch for BASE",
    )
    parser.add_argument(
        "--base-commit-id",
        required=True,
        metavar="BASE",
        help="upstream dicp commit the adaptation starts from",
    )
    parser.add_argument(
        "--current-commit-id",
        default="HEAD",
        metavar="CUR",
        help="commit holding the adapted sources (default: HEAD)",
    )
    parser.add_argument(
        "--key-path",
        metavar="DIR",
        help=f"encrypt the patch with DIR/{KEY_FILE} (created if missing); "
        "DIR must be outside the repository",
    )
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    repo = Repo.from_cwd()
    devices = validate_devices(args.device_type)
    repo.require_clean("patch.py publishes committed work only")
    base = repo.resolve_commit(args.base_commit_id, "--base-commit-id")
    cur = repo.resolve_commit(args.current_commit_id, "--current-commit-id")
    require_ancestor(repo, base, cur)
    repo.require_identity(base)
    key_dir = checked_key_dir(repo, args.key_path) if args.key_path else None
    require_partner_patches(repo, base, cur, devices)
    series = build_series(repo, base, cur)
    verify_series(repo, base, cur, series)
    # Only now, with the patch proven, is anything written: key, blobs, branch.
    path, content, key_created = stored_form(series, key_dir, devices[-1], base)
    branch = publish(repo, base, cur, devices, path, content)
    report(base, cur, devices, path, branch, key_dir if key_created else None)


def require_ancestor(repo, base, cur):
    if base == cur:
        raise PatchError(
            f"BASE and CUR are the same commit ({abbrev(base)}); commit your "
            "adaptation, then pass the upstream commit it starts from as BASE"
        )
    if not repo.is_ancestor(base, cur):
        raise PatchError(
            f"--base-commit-id {abbrev(base)} is not an ancestor of CUR "
            f"{abbrev(cur)}; pass the upstream dicp commit your work is based on "
            "(e.g. `git merge-base HEAD origin/main`)"
        )


def require_partner_patches(repo, base, cur, devices):
    """Earlier devices of a heterogeneous set must already be published for BASE in CUR."""
    for device in devices[:-1]:
        if not repo.tree_entries(cur, *patch_paths(device, base)):
            raise PatchError(
                f"{device} has no patch for base {abbrev(base)} in CUR {abbrev(cur)} "
                f"(expected {patch_dir(device, base)}/); the last --device-type is the one "
                "being adapted, the earlier ones must already be published: merge their "
                "patch branch into yours first"
            )


def build_series(repo, base, cur):
    if not repo.source_differences(base, cur):
        raise PatchError(
            f"{abbrev(base)}..{abbrev(cur)} changes nothing outside "
            f"{' and '.join(EXCLUDED_PATHS)}; commit your adaptation first"
        )
    return repo.format_series(base, cur)


def verify_series(repo, base, cur, series):
    """Apply the series to a pristine BASE and require CUR's tree (bookkeeping aside)."""
    with scratch_checkout(repo, base) as scratch:
        try:
            scratch.apply_series(series, f"the series {abbrev(base)}..{abbrev(cur)}")
        except PatchError as err:
            raise PatchError(f"{err}; nothing was written") from None
        differing = repo.source_differences(scratch.tree(), cur, env=scratch.env)
    if differing:
        raise PatchError(
            f"verification failed, BASE + patch differs from CUR in: {', '.join(differing)}. "
            "Merge commits are left out by git format-patch: rebase your work onto BASE as "
            "plain commits and retry. Nothing was written."
        )


def stored_form(series, key_dir, device, base):
    """(repository path, content, key_created) of the patch file to commit."""
    plain_path, sealed_path = patch_paths(device, base)
    if key_dir is None:
        return plain_path, series, False
    key, created = load_or_create_key(key_dir)
    return sealed_path, seal(series, key, device, base), created


def publish(repo, base, cur, devices, path, content):
    """Commit BASE + CUR's bookkeeping + the new patch on a new branch; return its name."""
    edits = bookkeeping_edits(repo, base, cur, devices)
    edits[path] = ("100644", repo.hash_blob(content))
    commit = repo.commit_edited_tree(base, edits, repo.commit_message(cur))
    branch = free_branch_name(repo, devices, base)
    repo.create_branch(branch, commit)
    return branch


def bookkeeping_edits(repo, base, cur, devices):
    """hardware/ and hetero.txt as in CUR, minus the patch being replaced, plus the new line."""
    edits = {path: None for _, _, path in repo.tree_entries(base, *EXCLUDED_PATHS)}
    replaced = set(patch_paths(devices[-1], base))  # plain and encrypted alike
    edits.update(
        {
            path: (mode, sha)
            for mode, sha, path in repo.tree_entries(cur, HARDWARE_DIR)
            if path not in replaced
        }
    )
    hetero = repo.read_file(cur, HETERO_FILE)
    if len(devices) > 1:
        hetero = add_hetero_line((hetero or b"").decode(), base, devices).encode()
    if hetero is not None:
        edits[HETERO_FILE] = ("100644", repo.hash_blob(hetero))
    return edits


def free_branch_name(repo, devices, base):
    stem = f"dicp-patch/{'+'.join(devices)}/{abbrev(base)}"
    for n in itertools.count(1):
        name = stem if n == 1 else f"{stem}-{n}"
        if not repo.branch_exists(name):
            return name


def report(base, cur, devices, path, branch, new_key_dir):
    print(
        f"verified: {abbrev(base)} + patch reproduces {abbrev(cur)} "
        f"(outside {' and '.join(EXCLUDED_PATHS)})"
    )
    print(f"wrote {path}")
    if len(devices) > 1:
        print(f"recorded `{hetero_line(base, devices)}` in {HETERO_FILE}")
    if new_key_dir:
        print(f"created key {new_key_dir / KEY_FILE}: keep it secret, users need it to unpatch")
    print(f"created branch {branch} from {abbrev(base)}; open a pull request with:")
    print(f"  git push origin {branch}")


if __name__ == "__main__":
    run_main(main)

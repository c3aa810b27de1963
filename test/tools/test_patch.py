"""End-to-end tests of tools/patch/patch.py and unpatch.py on throwaway git repositories.

Each test builds its own repository under pytest's tmp_path, commits the tools into it like the
real project does, and runs the tools as subprocesses with that repository as cwd.
"""

import base64
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[2] / "tools" / "patch"
HETERO = "tools/patch/hetero.txt"


# ---------------------------------------------------------------------------------------------
# helpers


def git(repo, *args, input=None):
    proc = subprocess.run(
        ["git", "-C", str(repo), *args], input=input, capture_output=True, check=True
    )
    return proc.stdout.decode().strip()


def git_bytes(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True).stdout


def tool(repo, script, *args, cwd=None):
    return subprocess.run(
        [sys.executable, str(Path(repo) / "tools/patch" / script), *args],
        cwd=cwd or repo,
        capture_output=True,
        text=True,
    )


def succeeds(proc):
    assert proc.returncode == 0, proc.stderr
    return proc


def fails(proc, *phrases):
    """A clean user error: status 1, `error:` on stderr, no traceback, every phrase present."""
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr, proc.stderr
    for phrase in phrases:
        assert phrase in proc.stderr, proc.stderr
    return proc


def write(repo, path, data, executable=False):
    target = Path(repo) / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data if isinstance(data, bytes) else data.encode())
    target.chmod(0o755 if executable else 0o644)


def commit_all(repo, message):
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def is_bookkeeping(path):
    return path.startswith("hardware/") or path == HETERO


def commit_files(repo, commit):
    """{path: (mode, bytes)} of `commit`, patch bookkeeping left out."""
    files = {}
    for record in filter(None, git(repo, "ls-tree", "-r", "-z", commit).split("\0")):
        meta, path = record.split("\t", 1)
        mode, _, sha = meta.split()
        if not is_bookkeeping(path):
            files[path] = (mode, git_bytes(repo, "cat-file", "blob", sha))
    return files


def dir_files(root):
    """{path: (mode, bytes)} of a directory tree, `.git` and patch bookkeeping left out."""
    files = {}
    for path in Path(root).rglob("*"):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and rel.split("/")[0] != ".git" and not is_bookkeeping(rel):
            mode = "100755" if path.stat().st_mode & stat.S_IXUSR else "100644"
            files[rel] = (mode, path.read_bytes())
    return files


def branches(repo):
    return set(git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads").split())


def new_branch(repo, before):
    (name,) = branches(repo) - before
    return name


def repo_state(repo):
    """Everything patch.py and unpatch.py --dir promise not to change."""
    return {
        "head": git(repo, "rev-parse", "HEAD"),
        "branch": git(repo, "symbolic-ref", "-q", "HEAD"),
        "index": git(repo, "ls-files", "-s"),
        "status": git(repo, "status", "--porcelain", "--untracked-files=all"),
        "stash": git(repo, "stash", "list", "--format=%H %s"),
        "worktrees": git(repo, "worktree", "list", "--porcelain"),
    }


# ---------------------------------------------------------------------------------------------
# fixtures


@pytest.fixture(autouse=True)
def isolated_git(tmp_path, monkeypatch):
    """No host git config, a fixed identity, and a private TMPDIR we can check for leftovers."""
    for kind in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{kind}_NAME", "Vendor Dev")
        monkeypatch.setenv(f"GIT_{kind}_EMAIL", "dev@vendor.example")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))


@pytest.fixture
def repo(tmp_path):
    """A dicp-like repository whose first commit (BASE) holds the tools and some sources."""
    root = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    for script in TOOLS.glob("*.py"):
        write(root, f"tools/patch/{script.name}", script.read_bytes())
    write(root, "dicp/core.py", "".join(f"line {i}\n" for i in range(20)))
    write(root, "dicp/old_name.py", "".join(f"keep {i}\n" for i in range(20)))
    write(root, "dicp/gone.py", "print('bye')\n")
    write(root, "data/weights.bin", bytes(range(256)) * 4)
    commit_all(root, "upstream dicp")
    return root


@pytest.fixture
def base(repo):
    return git(repo, "rev-parse", "HEAD")


def adapt(repo, tag):
    """Vendor commits on the current branch: edit, rename+edit, delete, binary add/edit, +x."""
    write(
        repo, "dicp/core.py", "".join(f"line {i}{' ' + tag if i == 3 else ''}\n" for i in range(20))
    )
    commit_all(repo, f"{tag}: tune core")
    git(repo, "mv", "dicp/old_name.py", f"dicp/{tag}_name.py")
    commit_all(repo, f"{tag}: rename")
    write(repo, f"dicp/{tag}_name.py", "".join(f"keep {i}\n" for i in range(19)) + f"{tag}\n")
    (repo / "dicp/gone.py").unlink()
    write(repo, f"data/{tag}.bin", b"\0\xff" + os.urandom(512) + b"\0")
    write(repo, "data/weights.bin", bytes(range(256)) * 3 + tag.encode() + b"\0\1")
    write(repo, f"bin/{tag}_run.sh", f"#!/bin/sh\necho {tag}\n", executable=True)
    return commit_all(repo, f"{tag}: kernels and binaries\n\nDetails for {tag}.")


def publish(repo, base, *devices, extra=(), cwd=None):
    """Run patch.py; return (branch, stdout)."""
    before = branches(repo)
    proc = succeeds(
        tool(repo, "patch.py", "--device-type", *devices, "--base-commit-id", base, *extra, cwd=cwd)
    )
    branch = new_branch(repo, before)
    assert f"created branch {branch}" in proc.stdout
    return branch, proc.stdout


def patch_file(base, device, encrypted=False):
    name = base[:12] + (".patch.encrypted" if encrypted else ".patch")
    return f"hardware/{device}/{base[:12]}/{name}"


def unpatch(repo, base, *devices, extra=()):
    return tool(repo, "unpatch.py", "--device-type", *devices, "--commit-id", base, *extra)


# ---------------------------------------------------------------------------------------------
# round trips


def test_homogeneous_round_trip(repo, base, tmp_path):
    cur = adapt(repo, "ax")
    branch, out = publish(repo, base, "A_X100", cwd=repo / "dicp")  # from a subdirectory
    assert branch == f"dicp-patch/A_X100/{base[:12]}"
    assert git(repo, "rev-parse", f"{branch}^") == base
    message = git(repo, "log", "-1", "--format=%B", cur)
    assert git(repo, "log", "-1", "--format=%B", branch) == message
    changed = git(repo, "diff-tree", "-r", "--name-only", base, branch).split()
    assert changed == [patch_file(base, "A_X100")]
    series = git_bytes(repo, "show", f"{branch}:{patch_file(base, 'A_X100')}")
    assert b"rename from dicp/old_name.py" in series and b"GIT binary patch" in series
    assert b"hardware/" not in series

    git(repo, "checkout", "-q", branch)
    out = succeeds(unpatch(repo, base, "A_X100", extra=("--dir", "build"))).stdout
    assert "build/A_X100/dicp" in out
    assert dir_files(repo / "build/A_X100/dicp") == commit_files(repo, cur)
    assert not list((tmp_path / "tmp").iterdir()), "temporary files left behind"


def test_in_place_unpatch_needs_clean_base_checkout(repo, base):
    cur = adapt(repo, "ax")
    branch, _ = publish(repo, base, "A_X100")
    git(repo, "checkout", "-q", branch, "--", "hardware")
    commit_all(repo, "main carries the patch but also CUR's sources")
    fails(unpatch(repo, base, "A_X100"), "is not dicp", "--dir")
    git(repo, "checkout", "-q", branch)
    write(repo, "dicp/core.py", "local edit\n")
    fails(unpatch(repo, base, "A_X100"), "uncommitted changes")
    git(repo, "checkout", "-q", "--", "dicp/core.py")
    succeeds(unpatch(repo, base, "A_X100"))
    assert dir_files(repo) == commit_files(repo, cur)


def test_heterogeneous_round_trip(repo, base):
    cur_a = adapt(repo, "ax")
    branch_a, _ = publish(repo, base, "A_X100")
    # Vendor B starts from BASE with A's published patch merged in, then adapts for B.
    git(repo, "checkout", "-q", "-b", "vendor-b", base)
    git(repo, "checkout", "-q", branch_a, "--", "hardware")
    commit_all(repo, "take A_X100's patch")
    cur_b = adapt(repo, "by")
    fails(
        tool(repo, "patch.py", "--device-type", "C_Z100", "B_Y100", "--base-commit-id", base),
        "C_Z100 has no patch",
    )
    branch_b, out = publish(repo, base, "A_X100", "B_Y100")
    assert f"{base[:12]}: A_X100 B_Y100" in out

    hetero = git(repo, "show", f"{branch_b}:{HETERO}")
    assert hetero == f"{base[:12]}: A_X100 B_Y100"
    a_patch = patch_file(base, "A_X100")
    blob = git(repo, "rev-parse", f"{branch_a}:{a_patch}")
    assert git(repo, "rev-parse", f"{branch_b}:{a_patch}") == blob

    git(repo, "checkout", "-q", branch_b)
    succeeds(unpatch(repo, base, "B_Y100", "A_X100", extra=("--dir", "build")))  # any order
    assert dir_files(repo / "build/A_X100/dicp") == commit_files(repo, cur_a)
    assert dir_files(repo / "build/B_Y100/dicp") == commit_files(repo, cur_b)
    fails(
        unpatch(repo, base, "A_X100", "C_Z100", extra=("--dir", "out")),
        "not a heterogeneous set",
        "A_X100 B_Y100",
    )
    assert not (repo / "out").exists()


def test_repeated_hetero_publish_keeps_one_line(repo, base):
    adapt(repo, "ax")
    branch_a, _ = publish(repo, base, "A_X100")
    git(repo, "checkout", "-q", "-b", "vendor-b", base)
    git(repo, "checkout", "-q", branch_a, "--", "hardware")
    commit_all(repo, "take A_X100's patch")
    adapt(repo, "by")
    first, _ = publish(repo, base, "A_X100", "B_Y100")
    git(repo, "checkout", "-q", first, "--", "hardware", HETERO)
    write(repo, "dicp/core.py", "B_Y100 v2\n")
    commit_all(repo, "by: v2")
    second, _ = publish(repo, base, "A_X100", "B_Y100")
    assert second == f"{first}-2"
    assert git(repo, "show", f"{second}:{HETERO}").splitlines() == [f"{base[:12]}: A_X100 B_Y100"]


# ---------------------------------------------------------------------------------------------
# encryption


@pytest.fixture
def sealed(repo, base, tmp_path):
    """(cur, key_dir): A_X100 published encrypted and its branch checked out."""
    cur = adapt(repo, "ax")
    key_dir = tmp_path / "keys" / "vendor-a"
    branch, out = publish(repo, base, "A_X100", extra=("--key-path", str(key_dir)))
    key = (key_dir / "dicp_patch.key").read_text().strip()
    assert key not in out
    git(repo, "checkout", "-q", branch)
    return cur, key_dir


def test_encrypted_round_trip(repo, base, sealed, tmp_path):
    cur, key_dir = sealed
    assert stat.S_IMODE(key_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((key_dir / "dicp_patch.key").stat().st_mode) == 0o600
    assert not (repo / patch_file(base, "A_X100")).exists()
    stored = (repo / patch_file(base, "A_X100", encrypted=True)).read_bytes()
    assert b"rename from" not in stored and b"line 3 ax" not in stored
    fails(unpatch(repo, base, "A_X100", extra=("--dir", "build")), "--key-path")
    key = (key_dir / "dicp_patch.key").read_bytes()
    again, _ = publish(
        repo, base, "A_X100", extra=("--current-commit-id", cur, "--key-path", str(key_dir))
    )
    resealed = git_bytes(repo, "show", f"{again}:{patch_file(base, 'A_X100', encrypted=True)}")
    assert (key_dir / "dicp_patch.key").read_bytes() == key, "existing key was replaced"
    assert resealed[:40] != stored[:40], "nonce reused"
    succeeds(unpatch(repo, base, "A_X100", extra=("--dir", "build", "--key-path", str(key_dir))))
    assert dir_files(repo / "build/A_X100/dicp") == commit_files(repo, cur)
    assert not list((tmp_path / "tmp").iterdir()), "temporary files left behind"


def test_wrong_key_refused(repo, base, sealed, tmp_path):
    other = tmp_path / "other-keys"
    write(other, "dicp_patch.key", base64.b64encode(os.urandom(32)) + b"\n")
    fails(
        unpatch(repo, base, "A_X100", extra=("--dir", "build", "--key-path", str(other))),
        "cannot decrypt",
        "wrong key",
    )
    assert not (repo / "build").exists()


def test_tampered_patch_refused(repo, base, sealed):
    _, key_dir = sealed
    path = repo / patch_file(base, "A_X100", encrypted=True)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1
    path.write_bytes(bytes(data))
    fails(
        unpatch(repo, base, "A_X100", extra=("--dir", "build", "--key-path", str(key_dir))),
        "cannot decrypt",
        "modified",
    )
    assert not (repo / "build").exists()


def test_sealed_patch_moved_to_another_device_refused(repo, base, sealed):
    _, key_dir = sealed
    moved = repo / patch_file(base, "B_Y100", encrypted=True)
    encrypted = (repo / patch_file(base, "A_X100", encrypted=True)).read_bytes()
    write(repo, moved.relative_to(repo), encrypted)
    fails(
        unpatch(repo, base, "B_Y100", extra=("--dir", "build", "--key-path", str(key_dir))),
        "cannot decrypt",
        "moved",
    )


def test_damaged_patch_leaves_no_output(repo, base):
    adapt(repo, "ax")
    branch, _ = publish(repo, base, "A_X100")
    git(repo, "checkout", "-q", branch)
    path = repo / patch_file(base, "A_X100")
    path.write_text(path.read_text().replace("-line 3\n", "-line 333\n"))
    fails(
        unpatch(repo, base, "A_X100", extra=("--dir", "build")),
        "does not apply",
        "check --commit-id",
    )
    assert not (repo / "build/A_X100").exists()
    assert len(git(repo, "worktree", "list").splitlines()) == 1, "scratch worktree left"


def test_key_path_inside_repo_refused(repo, base):
    adapt(repo, "ax")
    before = branches(repo)
    fails(
        tool(
            repo,
            "patch.py",
            "--device-type",
            "A_X100",
            "--base-commit-id",
            base,
            "--key-path",
            str(repo / "keys"),
        ),
        "inside the repository",
    )
    assert not (repo / "keys").exists()
    assert branches(repo) == before


# ---------------------------------------------------------------------------------------------
# refusals


def test_non_ancestor_base_refused(repo, base):
    git(repo, "checkout", "-q", "-b", "side")
    side = adapt(repo, "side")
    git(repo, "checkout", "-q", "main")
    adapt(repo, "ax")
    before = branches(repo)
    fails(
        tool(repo, "patch.py", "--device-type", "A_X100", "--base-commit-id", side),
        "not an ancestor",
    )
    assert branches(repo) == before


def test_dirty_tree_refused(repo, base):
    adapt(repo, "ax")
    write(repo, "dicp/core.py", "uncommitted\n")
    before = branches(repo)
    fails(
        tool(repo, "patch.py", "--device-type", "A_X100", "--base-commit-id", base),
        "uncommitted changes",
        "dicp/core.py",
    )
    assert branches(repo) == before
    assert (repo / "dicp/core.py").read_text() == "uncommitted\n"


@pytest.mark.parametrize("name", ["ax100", "A_", "_X100", "A-X100", "1A_X100", "A_X 100"])
def test_invalid_device_name_refused(repo, base, name):
    adapt(repo, "ax")
    fails(
        tool(repo, "patch.py", "--device-type", name, "--base-commit-id", base),
        "invalid device type",
        "<Vendor>_<Model>",
    )


def test_unverifiable_history_writes_nothing(repo, base):
    """An evil merge (a change only in the merge commit) is lost by format-patch."""
    git(repo, "checkout", "-q", "-b", "side")
    write(repo, "dicp/side.py", "side\n")
    commit_all(repo, "side work")
    git(repo, "checkout", "-q", "main")
    write(repo, "dicp/main.py", "main\n")
    commit_all(repo, "main work")
    git(repo, "merge", "-q", "--no-ff", "--no-commit", "side")
    write(repo, "dicp/evil.py", "only in the merge\n")
    commit_all(repo, "merge side")
    before = branches(repo)
    fails(
        tool(repo, "patch.py", "--device-type", "A_X100", "--base-commit-id", base),
        "verification failed",
        "dicp/evil.py",
        "Nothing was written",
    )
    assert branches(repo) == before


# ---------------------------------------------------------------------------------------------
# replacing and preserving


def test_repatch_replaces_only_that_patch(repo, base, tmp_path):
    adapt(repo, "ax")
    first, _ = publish(repo, base, "A_X100")
    # The vendor's branch now carries every published patch, then gets more work.
    git(repo, "checkout", "-q", first, "--", "hardware")
    write(repo, f"hardware/C_Z100/{base[:12]}/{base[:12]}.patch", "vendor C's patch\n")
    write(repo, "hardware/A_X100/0123456789ab/0123456789ab.patch", "A for another base\n")
    write(repo, "dicp/core.py", "second round\n")
    cur = commit_all(repo, "ax: second round")
    second, _ = publish(repo, base, "A_X100")
    third, _ = publish(repo, base, "A_X100", extra=("--key-path", str(tmp_path / "k")))

    assert git(repo, "rev-parse", f"{second}^") == base
    old, new = (git(repo, "show", f"{b}:{patch_file(base, 'A_X100')}") for b in (first, second))
    assert "second round" in new and "second round" not in old
    assert "hardware/" not in new, "patch bookkeeping leaked into the patch"
    for kept in (
        f"hardware/C_Z100/{base[:12]}/{base[:12]}.patch",
        "hardware/A_X100/0123456789ab/0123456789ab.patch",
    ):
        for branch in (second, third):
            blob = git(repo, "rev-parse", f"{cur}:{kept}")
            assert git(repo, "rev-parse", f"{branch}:{kept}") == blob
    # Going encrypted replaces the plain patch rather than keeping both.
    listing = git(repo, "ls-tree", "-r", "--name-only", third, f"hardware/A_X100/{base[:12]}")
    assert listing.split() == [patch_file(base, "A_X100", encrypted=True)]
    git(repo, "checkout", "-q", second)
    succeeds(unpatch(repo, base, "A_X100", extra=("--dir", "build")))
    assert dir_files(repo / "build/A_X100/dicp") == commit_files(repo, cur)
    assert not (repo / "build/A_X100/dicp/hardware").exists()


def test_unpatch_replaces_own_output_only(repo, base, tmp_path):
    cur = adapt(repo, "ax")
    branch, _ = publish(repo, base, "A_X100")
    git(repo, "checkout", "-q", branch)
    out = tmp_path / "out"
    write(out, "A_X100/dicp/stale.txt", "from an older run\n")
    write(out, "B_Y100/dicp/marker.txt", "another device\n")
    succeeds(unpatch(repo, base, "A_X100", extra=("--dir", str(out))))
    assert dir_files(out / "A_X100/dicp") == commit_files(repo, cur)
    assert (out / "B_Y100/dicp/marker.txt").read_text() == "another device\n"
    assert sorted(p.name for p in (out / "A_X100").iterdir()) == ["dicp"]


def test_user_repo_state_unchanged(repo, base, tmp_path):
    adapt(repo, "ax")
    write(repo, "dicp/core.py", "stashed\n")
    git(repo, "stash", "-q")
    write(repo, "notes.txt", "untracked\n")
    before = repo_state(repo)
    branches_before = branches(repo)

    branch, _ = publish(repo, base, "A_X100", extra=("--key-path", str(tmp_path / "k")))
    fails(
        tool(repo, "patch.py", "--device-type", "B_Y100", "--base-commit-id", "main"), "same commit"
    )
    git(repo, "worktree", "add", "-q", str(tmp_path / "pr"), branch)
    succeeds(
        unpatch(
            tmp_path / "pr",
            base,
            "A_X100",
            extra=("--dir", str(tmp_path / "out"), "--key-path", str(tmp_path / "k")),
        )
    )
    git(repo, "worktree", "remove", str(tmp_path / "pr"))

    assert repo_state(repo) == before
    assert branches(repo) == branches_before | {branch}
    assert (repo / "notes.txt").read_text() == "untracked\n"

"""Git plumbing shared by patch.py and unpatch.py.

Nothing here touches the user's working tree, index, stash or current branch: reads go through
plumbing commands, trees are built in a temporary index file, and patches are applied in
temporary worktrees whose new objects land in a private object store deleted on exit.
"""

import os
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path

from common import SOURCE_PATHSPEC, PatchError

# Our temporary worktrees must not run the user's hooks, and automatic gc/maintenance must not
# start in the user's repository in the middle of a run.
_SAFE_CONFIG = ("-c", "core.hooksPath=/dev/null", "-c", "gc.auto=0", "-c", "maintenance.auto=false")

# `git am` records commits in scratch worktrees; they are thrown away, so any identity will do
# and the user needs none configured.
_SCRATCH_IDENTITY = {
    "GIT_COMMITTER_NAME": "dicp-patch",
    "GIT_COMMITTER_EMAIL": "dicp-patch@localhost",
}


class GitError(PatchError):
    def __init__(self, args, stderr):
        detail = stderr.decode(errors="replace").strip()
        super().__init__(f"`git {' '.join(args)}` failed: {detail}")
        self.detail = detail


class Repo:
    """A git repository addressed by its top-level directory."""

    def __init__(self, top):
        self.top = Path(top)

    @classmethod
    def from_cwd(cls):
        try:
            proc = subprocess.run(
                ["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True
            )
        except FileNotFoundError:
            raise PatchError("git is not installed; install git and retry") from None
        if proc.returncode:
            raise PatchError("not inside a git checkout; cd into your dicp repository and retry")
        return cls(proc.stdout.strip())

    def run(self, *args, input=None, env=None, cwd=None):
        """Run git and return stdout bytes; raise GitError with git's message on failure."""
        cmd = ["git", *_SAFE_CONFIG, "-C", str(cwd or self.top), *args]
        proc = subprocess.run(
            cmd, input=input, capture_output=True, env={**os.environ, **(env or {})}
        )
        if proc.returncode:
            raise GitError(args, proc.stderr)
        return proc.stdout

    def text(self, *args, **kwargs):
        return self.run(*args, **kwargs).decode().strip()

    def succeeds(self, *args, env=None):
        try:
            self.run(*args, env=env)
        except GitError:
            return False
        return True

    def resolve_commit(self, rev, option):
        """Full hash of `rev`; `option` names the flag the user should fix."""
        if rev.startswith("-") or not self.succeeds("rev-parse", "--verify", f"{rev}^{{commit}}"):
            raise PatchError(
                f"{option} {rev!r} is not a commit in {self.top}; pass an existing "
                "commit id (see `git log`) or `git fetch` it first"
            )
        return self.text("rev-parse", "--verify", f"{rev}^{{commit}}")

    def require_identity(self, commit):
        """Fail before any work if git could not record the branch commit.

        `git var` accepts guessed identities that `git commit-tree` rejects, so try a real
        commit-tree, writing into a throwaway object store.
        """
        with tempfile.TemporaryDirectory(prefix="dicp-patch-probe-") as tmp:
            env = {
                "GIT_OBJECT_DIRECTORY": tmp,
                "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(self.objects_dir()),
            }
            try:
                self.run("commit-tree", f"{commit}^{{tree}}", "-m", "probe", env=env)
            except GitError:
                raise PatchError(
                    "git does not know who you are; run `git config user.name "
                    '"Your Name"` and `git config user.email you@example.com`'
                ) from None

    def is_ancestor(self, ancestor, descendant):
        return self.succeeds("merge-base", "--is-ancestor", ancestor, descendant)

    def dirty_tracked_paths(self):
        out = self.run("status", "--porcelain=v1", "-z", "--untracked-files=no")
        return [entry[3:] for entry in out.decode(errors="replace").split("\0") if entry[3:]]

    def require_clean(self, why):
        dirty = self.dirty_tracked_paths()
        if dirty:
            raise PatchError(
                f"uncommitted changes to tracked files ({', '.join(dirty[:5])}): "
                f"{why}; commit or stash them first"
            )

    def tree_entries(self, commit, *paths):
        """[(mode, sha, path)] of the blobs under `paths` in `commit`."""
        out = self.run("ls-tree", "-r", "-z", "--full-tree", commit, "--", *paths)
        entries = []
        for record in filter(None, out.decode().split("\0")):
            meta, path = record.split("\t", 1)
            mode, _type, sha = meta.split()
            entries.append((mode, sha, path))
        return entries

    def read_file(self, commit, path):
        """Content of `path` in `commit`, or None when it does not exist there."""
        if not self.succeeds("cat-file", "-e", f"{commit}:{path}"):
            return None
        return self.run("cat-file", "blob", f"{commit}:{path}")

    def source_differences(self, tree_a, tree_b, env=None):
        """Paths (outside the patch bookkeeping) whose content or mode differ."""
        out = self.run(
            "diff-tree",
            "-r",
            "--name-only",
            "--no-renames",
            "-z",
            tree_a,
            tree_b,
            "--",
            *SOURCE_PATHSPEC,
            env=env,
        )
        return [p for p in out.decode(errors="replace").split("\0") if p]

    def format_series(self, base, cur):
        """Every commit in base..cur as one mbox, binary-safe, bookkeeping paths left out.

        Options are spelled out so user config (prefixes, cover letters, signatures, auto base)
        cannot change what `git am` later sees.
        """
        return self.run(
            "format-patch",
            "--stdout",
            "--binary",
            "--full-index",
            "-M",
            "--no-cover-letter",
            "--no-signature",
            "--no-base",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            f"{base}..{cur}",
            "--",
            *SOURCE_PATHSPEC,
        )

    def hash_blob(self, data):
        return self.text("hash-object", "-w", "--stdin", input=data)

    def commit_message(self, commit):
        # Raw object rather than `git log`, whose output user config can decorate.
        raw = self.run("cat-file", "commit", commit)
        return raw.partition(b"\n\n")[2]

    def objects_dir(self):
        common = self.text("rev-parse", "--path-format=absolute", "--git-common-dir")
        return Path(common) / "objects"

    def commit_edited_tree(self, parent, edits, message):
        """Commit `parent`'s tree with `edits` ({path: (mode, sha) or None to delete}).

        Works in a temporary index file, so the user's index and checkout are never read
        or written.
        """
        with tempfile.TemporaryDirectory(prefix="dicp-patch-index-") as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            self.run("read-tree", parent, env=env)
            zero = "0" * len(parent)
            lines = [
                f"{edit[0] if edit else '0'} {edit[1] if edit else zero}\t{path}\0"
                for path, edit in edits.items()
            ]
            self.run("update-index", "-z", "--index-info", input="".join(lines).encode(), env=env)
            tree = self.text("write-tree", env=env)
        return self.text("commit-tree", tree, "-p", parent, "-F", "-", input=message)

    def create_branch(self, name, commit):
        """Create refs/heads/<name>; fails rather than moving an existing branch."""
        self.run("update-ref", f"refs/heads/{name}", commit, "0" * len(commit))

    def branch_exists(self, name):
        return self.succeeds("rev-parse", "--verify", "--quiet", f"refs/heads/{name}")


class Scratch:
    """A detached temporary worktree plus the environment that keeps its objects private."""

    def __init__(self, repo, path, env):
        self.repo, self.path, self.env = repo, path, env

    def run(self, *args, input=None):
        return self.repo.run(*args, input=input, env=self.env, cwd=self.path)

    def apply_series(self, mbox, what):
        """`git am` the series; `what` names the patch in the error message."""
        try:
            self.run("am", "--quiet", "--keep-cr", "--no-3way", "--whitespace=nowarn", input=mbox)
        except GitError as err:
            raise PatchError(f"{what} does not apply: {_am_reason(err.detail)}") from None

    def tree(self):
        return self.run("rev-parse", "HEAD^{tree}").decode().strip()


def _am_reason(detail):
    # Drop `git am --continue/--skip/--abort` advice: the scratch worktree is already gone.
    lines = [
        line.removeprefix("error: ")
        for line in detail.splitlines()
        if not line.startswith("hint:") and "git am --" not in line
    ]
    return "; ".join(lines) or "git am reported no reason"


@contextmanager
def scratch_checkout(repo, commit, keep_at=None):
    """Yield a Scratch worktree checked out at `commit`, detached.

    The worktree registration is always removed on exit. By default its files go too; with
    `keep_at` the tree is created there and its files stay as a plain directory (no `.git`)
    when the block finishes without error.
    """
    holder = Path(tempfile.mkdtemp(prefix="dicp-patch-"))
    path = Path(keep_at) if keep_at else holder / "tree"
    env = {
        **_SCRATCH_IDENTITY,
        "GIT_OBJECT_DIRECTORY": str(holder / "objects"),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(repo.objects_dir()),
    }
    (holder / "objects").mkdir()
    try:
        repo.run("worktree", "add", "--detach", "--quiet", str(path), commit, env=env)
        yield Scratch(repo, path, env)
        if keep_at:
            (path / ".git").unlink()  # the registration is pruned below; files stay
    finally:
        if (path / ".git").exists():
            _quietly(repo, "worktree", "remove", "--force", str(path), env=env)
        _quietly(repo, "worktree", "prune", env=env)
        shutil.rmtree(holder, ignore_errors=True)


def _quietly(repo, *args, env):
    # Cleanup must not hide the error that got us here.
    try:
        repo.run(*args, env=env)
    except GitError:
        pass

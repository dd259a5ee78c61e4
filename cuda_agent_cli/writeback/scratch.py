"""A scratch copy of the user's repository, as a git worktree outside it, for `check --fix`.

Fixes are applied there one kernel after another (each plan sees the ones before it), then
leave it as a patch or as one commit on a new branch. The user's working tree, index and
current branch are never touched: the scratch tree has its own, and the branch is made with
`git branch NAME SHA`, which checks nothing out.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from cuda_agent_cli.errors import BadInput, WriteBackRefused
from cuda_agent_cli.writeback.git import _has_identity, _repo

_ANON = ["-c", "user.name=cuda-agent", "-c", "user.email=cuda-agent@localhost"]


@dataclass
class ScratchTree:
    root: Path  # the scratch worktree: the same paths as the user's repository
    base: str  # the commit its files started from
    repo: Any  # git.Repo of the scratch worktree

    def _git(self, *args: str) -> str:
        ident = [] if _has_identity(self.repo) else _ANON
        return str(self.repo.git.execute(["git", *ident, *args]))

    def commit(self, paths: list[str], message: str) -> str:
        """Commit exactly `paths` (written or deleted) in the scratch tree; the new commit's sha."""
        self._git("add", "-A", "--", *paths)
        self._git("commit", "-q", "--no-verify", "-m", message, "--", *paths)
        return str(self.repo.head.commit.hexsha)

    def diff(self, commit: str) -> str:
        """The changes from the base to `commit`, for `git apply` in the user's working tree."""
        return str(self.repo.git.diff("--binary", self.base, commit)) + "\n"


def dirty_tree(root: Path, also: list[str]) -> list[str]:
    """Tracked files with uncommitted changes anywhere, and any change (untracked files too)
    under the paths in `also`: what committing on a branch from HEAD would silently leave out."""
    repo = _repo(root)
    if repo is None:
        return []
    tracked = repo.git.status("--porcelain", "--untracked-files=no").splitlines()
    near = repo.git.status("--porcelain", "--untracked-files=all", "--", *also).splitlines() if also else []
    return sorted({line[3:].strip().strip('"').split(" -> ")[-1] for line in tracked + near if len(line) > 3})


def _working_tree_changes(repo: Any) -> list[str]:
    """Paths where the working tree differs from HEAD: tracked edits and deletions, untracked files."""
    names = repo.git.diff("--name-only", "HEAD", "--").splitlines()
    names += repo.git.ls_files("--others", "--exclude-standard").splitlines()
    return sorted({n.strip() for n in names if n.strip()})


@contextlib.contextmanager
def scratch_tree(root: Path, *, with_working_tree: bool) -> Iterator[ScratchTree]:
    """A detached worktree of HEAD in a temporary folder, removed afterwards.

    `with_working_tree`: its files are the user's working tree as it is now (uncommitted edits
    and untracked files copied over, committed there as the base), so a patch made from it
    applies to that tree; otherwise the base is HEAD, for a commit on a branch from HEAD."""
    import git

    repo = _repo(root)
    if repo is None or repo.working_tree_dir is None:
        raise BadInput(f"{root} is not a git repository", "run `git init` and commit, or pass --patch DIR")
    try:
        head = repo.head.commit.hexsha
    except ValueError:
        raise BadInput(f"{root} has no commit yet", "commit the repository first") from None
    top = Path(repo.working_tree_dir).resolve()
    holder = Path(tempfile.mkdtemp(prefix="cuda-agent-fix-"))
    tree = holder / top.name
    try:
        repo.git.worktree("add", "--detach", str(tree), head)
    except git.GitCommandError as exc:
        shutil.rmtree(holder, ignore_errors=True)
        raise WriteBackRefused(
            f"cannot make a scratch copy of {top}: {(exc.stderr or str(exc)).strip()}",
            "check that the repository is writable (git worktree add)",
        ) from None
    try:
        scratch = ScratchTree(tree, head, git.Repo(tree))
        if with_working_tree:
            changed = _working_tree_changes(repo)
            for rel in changed:
                src, dst = top / rel, tree / rel
                if src.is_file():
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(src, dst)
                elif dst.is_file():
                    dst.unlink()
            if changed and scratch.repo.git.status("--porcelain", "--", *changed).strip():
                scratch.base = scratch.commit(changed, "the working tree as check --fix found it")
        yield scratch
    finally:
        with contextlib.suppress(git.GitCommandError):
            repo.git.worktree("remove", "--force", str(tree))
        shutil.rmtree(holder, ignore_errors=True)
        with contextlib.suppress(git.GitCommandError):
            repo.git.worktree("prune")


def new_branch(root: Path, commit: str, prefix: str = "cuda-agent/check-fix") -> str:
    """A new branch at `commit`, named `prefix-<time>` (-2, -3 ... when taken); nothing is checked out."""
    repo = _repo(root)
    if repo is None:
        raise WriteBackRefused(f"{root} is not a git repository", "pass --patch DIR")
    base = f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}"
    existing = {h.name for h in repo.heads}
    name, n = base, 2
    while name in existing:
        name, n = f"{base}-{n}", n + 1
    repo.git.branch(name, commit)
    return name

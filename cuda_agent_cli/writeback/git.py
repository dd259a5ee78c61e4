"""Git, for write-back only (the one importer of gitpython): dirty checks, a new branch, a commit.

The user's work is never at risk: the branch is created from HEAD with `git checkout -b`, which
keeps the working tree and index as they are, and the commit contains exactly the paths that
were written, nothing the user had staged or left modified elsewhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_agent_cli.errors import BadInput, WriteBackRefused


@dataclass(frozen=True)
class CommitInfo:
    branch: str
    commit: str
    previous_branch: str | None


def _repo(path: Path) -> Any:  # git.Repo, imported lazily
    import git

    try:
        return git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None


def git_root(path: Path) -> Path | None:
    """The working tree root of the git repository holding `path`, if any."""
    repo = _repo(path if path.is_dir() else path.parent)
    if repo is None or repo.working_tree_dir is None:
        return None
    return Path(repo.working_tree_dir).resolve()


def dirty_paths(root: Path, rel_paths: list[str]) -> list[str]:
    """Those of `rel_paths` with uncommitted changes (staged, unstaged, or untracked but present)."""
    repo = _repo(root)
    if repo is None:
        return []
    out = repo.git.status("--porcelain", "--untracked-files=all", "--", *rel_paths)
    dirty = []
    for line in out.splitlines():
        if len(line) > 3:
            path = line[3:].strip().strip('"')
            if " -> " in path:
                path = path.split(" -> ", 1)[1]
            dirty.append(path)
    return dirty


def branch_name(class_snake: str, session_id: str, root: Path) -> str:
    """cuda-agent/<class>-<session>, with -2, -3 ... when it already exists."""
    repo = _repo(root)
    # Session ids end in a random hex part (20260130-051200-3f9a1c): enough to tell branches apart.
    short = session_id.rsplit("-", 1)[-1] if re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]+", session_id) else session_id
    base = f"cuda-agent/{re.sub(r'[^A-Za-z0-9._-]+', '-', class_snake)}-{short}"
    existing = {h.name for h in repo.heads} if repo is not None else set()
    name, n = base, 2
    while name in existing:
        name, n = f"{base}-{n}", n + 1
    return name


def commit_on_new_branch(root: Path, rel_paths: list[str], message: str, branch: str) -> CommitInfo:
    """Create `branch` from HEAD (working tree untouched), commit exactly `rel_paths` on it."""
    import git

    repo = _repo(root)
    if repo is None:
        raise WriteBackRefused(f"{root} is not a git repository", "use --no-commit")
    previous = None
    try:
        previous = repo.active_branch.name
    except (TypeError, ValueError):
        previous = None  # detached HEAD
    try:
        repo.git.checkout("-b", branch)
        repo.git.add("--", *rel_paths)
        args = ["commit", "-m", message, "--only", "--", *rel_paths]
        if not _has_identity(repo):
            args = ["-c", "user.name=cuda-agent", "-c", "user.email=cuda-agent@localhost", *args]
        repo.git.execute(["git", *args])
        sha = repo.head.commit.hexsha
    except git.GitCommandError as exc:
        detail = (exc.stderr or str(exc)).strip().splitlines()
        raise WriteBackRefused(
            f"the files were written but the commit on {branch} failed: {detail[-1] if detail else exc}",
            "commit them yourself (they are in the working tree)",
        ) from None
    return CommitInfo(branch, sha, previous)


def _has_identity(repo: Any) -> bool:
    try:
        reader = repo.config_reader()
        return bool(reader.get_value("user", "name", "")) and bool(reader.get_value("user", "email", ""))
    except Exception:
        return False


def init_repo(root: Path, message: str) -> None:
    """A new repository at `root` with everything in it committed (the demo's scratch project)."""
    import git

    repo = git.Repo.init(root)
    repo.git.add("--all")
    args = ["commit", "-q", "-m", message]
    if not _has_identity(repo):
        args = ["-c", "user.name=cuda-agent", "-c", "user.email=cuda-agent@localhost", *args]
    repo.git.execute(["git", *args])


def changed_files(root: Path, ref: str) -> set[str]:
    """Repository-relative paths that differ between `ref` and the working tree (committed since,
    staged or not), plus untracked files."""
    import git

    repo = _repo(root)
    if repo is None:
        raise BadInput(f"{root} is not a git repository, so --changed-since cannot be used", "drop --changed-since")
    try:
        repo.git.rev_parse("--verify", "--quiet", f"{ref}^{{commit}}")
    except git.GitCommandError:
        raise BadInput(
            f"--changed-since {ref}: no such commit, branch or tag", "pass a ref git knows (e.g. origin/main)"
        ) from None
    names = repo.git.diff("--name-only", ref, "--").splitlines()
    names += repo.git.ls_files("--others", "--exclude-standard").splitlines()
    prefix = Path(repo.working_tree_dir).resolve()
    base = root.resolve()
    out = set()
    for n in names:
        p = (prefix / n.strip()).resolve()
        try:
            out.add(p.relative_to(base).as_posix())
        except ValueError:
            continue
    return out


def revert_commit(root: Path, sha: str) -> str:
    """Undo a commit write-back made, with a new commit that reverts it (history kept); its sha.

    Refused when the files it touched have changed since, so nobody's later work is reverted."""
    import git

    repo = _repo(root)
    if repo is None:
        raise WriteBackRefused(f"{root} is not a git repository", "nothing to revert")
    try:
        touched = repo.git.diff_tree("--no-commit-id", "--name-only", "-r", sha).splitlines()
    except git.GitCommandError:
        raise WriteBackRefused(f"commit {sha[:10]} is not in {root}", "it may have been removed already") from None
    dirty = dirty_paths(root, touched) if touched else []
    if dirty:
        raise WriteBackRefused(
            f"uncommitted changes in {', '.join(dirty[:3])}", "commit or stash them first, then undo again"
        )
    args = ["revert", "--no-edit", sha]
    if not _has_identity(repo):
        args = ["-c", "user.name=cuda-agent", "-c", "user.email=cuda-agent@localhost", *args]
    try:
        repo.git.execute(["git", *args])
    except git.GitCommandError as exc:
        detail = (exc.stderr or str(exc)).strip().splitlines()
        try:
            repo.git.revert("--abort")
        except git.GitCommandError:
            pass
        raise WriteBackRefused(
            f"git revert {sha[:10]} failed: {detail[-1] if detail else exc}", "revert it by hand"
        ) from None
    return str(repo.head.commit.hexsha)


EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's empty tree: the base before any commit


@dataclass(frozen=True)
class RepoState:
    """Where a repository stood when a chat started: the commit checked out and the paths that
    already had uncommitted changes or were untracked (repository-relative)."""

    head: str | None  # None: no commit yet
    dirty: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"head": self.head, "dirty": list(self.dirty)}

    @classmethod
    def from_json(cls, data: Any) -> RepoState | None:
        if not isinstance(data, dict):
            return None
        head = data.get("head")
        dirty = data.get("dirty") or []
        return cls(head if isinstance(head, str) else None, tuple(str(p) for p in dirty if isinstance(p, str)))


@dataclass(frozen=True)
class SessionDiff:
    """What changed since a chat started: `patch` (committed since, uncommitted, and new files),
    `left_out` (paths that were already uncommitted then, so their changes are not the chat's
    alone) and `base` (the start commit)."""

    patch: str
    left_out: list[str]
    base: str | None


def _status_paths(repo: Any) -> list[str]:
    """Every path `git status` lists (modified, staged, deleted, untracked, both sides of a rename)."""
    out = repo.git.status("--porcelain=v1", "-z", "--untracked-files=all")
    tokens = out.split("\0")
    paths: list[str] = []
    i = 0
    while i < len(tokens):
        entry = tokens[i]
        i += 1
        if len(entry) < 4:
            continue
        paths.append(entry[3:])
        if entry[0] in "RC" or entry[1] in "RC":
            if i < len(tokens) and tokens[i]:
                paths.append(tokens[i])  # the rename's old path follows
            i += 1
    return paths


def repo_state(root: Path) -> RepoState | None:
    """The repository's state now (the start of a chat's /diff); None outside git."""
    repo = _repo(root)
    if repo is None:
        return None
    try:
        head: str | None = str(repo.head.commit.hexsha)
    except ValueError:  # no commit yet
        head = None
    return RepoState(head, tuple(sorted(set(_status_paths(repo)))))


def _split_z(out: str) -> list[str]:
    return [p for p in out.split("\0") if p.strip()]


def session_diff(root: Path, start: RepoState | None) -> SessionDiff | None:
    """The changes since `start` under `root`: the diff from the start commit to the working tree
    (commits made since included) plus every file created since that git does not track or
    ignore; the paths already dirty at the start are left out and listed. Reads only: the
    index and the working tree are not touched. None outside git."""
    import git

    repo = _repo(root)
    if repo is None or repo.working_tree_dir is None:
        return None
    if start is None:
        start = RepoState(None)
    top = Path(repo.working_tree_dir).resolve()
    try:
        prefix = root.resolve().relative_to(top).as_posix()
    except ValueError:
        prefix = "."
    spec = prefix if prefix not in ("", ".") else "."
    base = start.head
    if base is not None:
        try:
            repo.git.rev_parse("--verify", "--quiet", f"{base}^{{commit}}")
        except git.GitCommandError:
            base = None  # the start commit is gone (history rewritten): compare with nothing
    against = base or EMPTY_TREE
    before = set(start.dirty)
    changed = _split_z(repo.git.diff("--name-only", "-z", against, "--", spec))
    untracked = _split_z(repo.git.ls_files("--others", "--exclude-standard", "-z", "--", spec))
    keep = [p for p in changed if p not in before]
    new = [p for p in untracked if p not in before]
    left_out = sorted({p for p in changed + untracked if p in before})
    parts = []
    if keep:
        parts.append(str(repo.git.diff(against, "--", *keep)))
    for p in sorted(new):
        # --no-index exits 1 when the files differ, which they always do here.
        parts.append(str(repo.git.diff("--no-index", "--", "/dev/null", p, with_exceptions=False)))
    patch = "\n".join(x.rstrip("\n") for x in parts if x.strip())
    return SessionDiff(patch + "\n" if patch else "", left_out, base)

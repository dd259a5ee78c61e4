"""Write-back's refusal rules, in one place: what `apply_plan` refuses at the end of a session,
and the same rules asked before the session starts, so nobody pays for one that cannot land."""

from __future__ import annotations

from pathlib import Path

from cuda_agent_cli.errors import BadInput, WriteBackRefused
from cuda_agent_cli.preflight import cannot_write_in


def not_in_git(module: Path) -> WriteBackRefused:
    return WriteBackRefused(
        f"{module} is not inside a git repository, so applying could not be undone",
        "use --no-apply (review only), --patch FILE (save the diff), or --no-commit to write the files anyway",
    )


def dirty(paths: list[str]) -> WriteBackRefused:
    shown = ", ".join(paths[:3]) + (" ..." if len(paths) > 3 else "")
    return WriteBackRefused(f"uncommitted changes in {shown}", "commit or stash them first, or pass --allow-dirty")


def check_repository(module_file: Path, repo_root: Path | None, commit: bool) -> None:
    """Applying writes next to the module, in the repository root and, to commit, in .git."""
    folders = [module_file.parent]
    if repo_root is not None:
        folders.append(repo_root)
        for existing in (repo_root / ".cuda-agent", module_file.parent / "_cuda_agent"):
            if existing.is_dir():
                folders.append(existing)
        git_dir = repo_root / ".git"
        if commit and git_dir.is_dir():
            folders.append(git_dir)
    for folder in dict.fromkeys(folders):
        problem = cannot_write_in(folder)
        if problem:
            raise BadInput(
                f"applying the kernel would fail: {problem}",
                "make the repository writable, or pass --no-apply (with --patch FILE to keep the diff)",
            )


def refuse_before_session(module_file: Path, fallback_root: Path, *, commit: bool, allow_dirty: bool) -> None:
    """Raise now what applying a kernel to `module_file` would raise after the session: outside
    git (unless not committing), uncommitted edits of the module, folders that cannot be written."""
    from cuda_agent_cli.writeback.git import dirty_paths, git_root

    root = git_root(module_file)
    if root is None:
        if commit:
            raise not_in_git(module_file)
        check_repository(module_file, fallback_root, commit=False)
        return
    rel = module_file.resolve().relative_to(root).as_posix()
    if not allow_dirty and dirty_paths(root, [rel]):
        raise dirty([rel])
    check_repository(module_file, root, commit=commit)


def check_paths_early(module_file: Path, *, commit: bool) -> None:
    """Before the target is even imported: the folders of a module file that applying writes in."""
    from cuda_agent_cli.writeback.git import git_root

    root = git_root(module_file)
    if root is not None or not commit:
        check_repository(module_file, root, commit=commit)

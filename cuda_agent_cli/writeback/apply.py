"""From a verified candidate to changes in the user's repository: plan, check, apply.

`build_plan` computes every file change (integration + manifest) and the patch without writing
anything; the review shows it; `apply_plan` writes it only after the checks that protect the
user's work (the module unchanged since the session read it, no uncommitted edits to files it
rewrites unless allowed, a git repository unless committing is turned off).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent_cli.errors import WriteBackRefused
from cuda_agent_cli.writeback import refusal
from cuda_agent_cli.writeback.diff import FileChange, unified_patch, write_changes
from cuda_agent_cli.writeback.fingerprint import class_fingerprint, text_sha256
from cuda_agent_cli.writeback.integrate import IntegrationSpec, kernel_folder, plan_integration
from cuda_agent_cli.writeback.manifest import MANIFEST_PATH, updated_manifest


@dataclass
class WriteBackPlan:
    repo_root: Path
    in_git: bool
    module_rel: str
    module_sha256: str
    changes: list[FileChange]
    patch: str
    branch: str | None
    commit_message: str
    folder: str
    # Every file the kernel folder will hold once applied (folder-relative path -> text).
    folder_files: dict[str, str] = field(default_factory=dict)


@dataclass
class ApplyResult:
    written: list[str]
    branch: str | None = None
    commit: str | None = None
    previous_branch: str | None = None
    notes: list[str] = field(default_factory=list)


def _read_existing(root: Path, rels: list[str]) -> dict[str, str]:
    out = {}
    for rel in rels:
        p = root / rel
        if p.is_file():
            out[rel] = p.read_text()
    return out


def build_plan(spec: IntegrationSpec, *, manifest_entry: dict[str, Any], fallback_root: Path) -> WriteBackPlan:
    """Everything applying would change, computed without writing (`fallback_root`: where paths are
    relative to when the module is not in a git repository)."""
    from cuda_agent_cli.writeback.git import branch_name, git_root

    module_source, class_name, session_id = spec.module_source, spec.class_name, spec.session_id
    repo = git_root(spec.module_file)
    root, in_git = (repo, True) if repo is not None else (fallback_root.resolve(), False)
    folder = kernel_folder(root, spec.module_file, spec.class_snake)
    # Read what is there now, so a second apply diffs against the first instead of overwriting.
    probe = plan_integration(spec, root)
    on_disk = (
        [
            p.relative_to(root).as_posix()
            for p in sorted((root / folder).rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts
        ]
        if (root / folder).is_dir()
        else []
    )
    existing = _read_existing(root, sorted({c.path for c in probe[1:]} | set(on_disk)) + [MANIFEST_PATH])
    changes = plan_integration(spec, root, existing={**existing, probe[0].path: module_source})
    stale = [rel for rel in existing if rel.startswith(folder + "/") and rel not in {c.path for c in changes}]
    manifest_entry = manifest_record(
        manifest_entry,
        module_source=module_source,
        class_name=class_name,
        module_rel=changes[0].path,
        folder=folder,
        changes=changes,
    )
    manifest_text = updated_manifest(existing.get(MANIFEST_PATH), manifest_entry)
    changes.append(FileChange(MANIFEST_PATH, manifest_text, existing.get(MANIFEST_PATH)))
    for rel in stale:
        # Kernel files of an earlier apply that this candidate lacks would still be compiled in.
        changes.append(FileChange(rel, None, existing[rel]))
    eager, comp = manifest_entry.get("speedup_vs_eager"), manifest_entry.get("speedup_vs_compile")
    speeds = (
        f" ({eager:.2f}x vs eager, {comp:.2f}x vs torch.compile)"
        if isinstance(eager, (int, float)) and isinstance(comp, (int, float))
        else ""
    )
    msg = (
        f"cuda-agent: {class_name} runs a verified {spec.verified.device} kernel{speeds}"
        + f"\n\nSession {session_id}. Calls that match the verified inputs use the kernel in "
        f"{folder}/; all others run the original code. Details in {MANIFEST_PATH}.\n"
    )
    return WriteBackPlan(
        repo_root=root,
        in_git=in_git,
        module_rel=changes[0].path,
        module_sha256=hashlib.sha256(module_source.encode()).hexdigest(),
        changes=[c for c in changes if c.changed],
        patch=unified_patch([c for c in changes if c.changed]),
        branch=branch_name(spec.class_snake, session_id, root) if in_git else None,
        commit_message=msg,
        folder=folder,
        folder_files={
            c.path[len(folder) + 1 :]: c.new for c in changes if c.path.startswith(folder + "/") and c.new is not None
        },
    )


def manifest_record(
    entry: dict[str, Any],
    *,
    module_source: str,
    class_name: str,
    module_rel: str,
    folder: str,
    changes: list[FileChange],
) -> dict[str, Any]:
    """The manifest entry completed with what check and build compare against: where the kernel
    lives, the reference's fingerprint, and the hash of every file the folder will hold."""
    fp = class_fingerprint(module_source, class_name)
    files = {
        c.path[len(folder) + 1 :]: text_sha256(c.new)
        for c in changes
        if c.path.startswith(folder + "/") and c.new is not None
    }
    head = {
        "target": entry.get("target"),
        "class": entry.get("class", class_name),
        "module": entry.get("module"),
        "module_file": module_rel,
        "folder": folder,
        "reference_sha256": fp.sha256 if fp else None,
        "signature": fp.signature if fp else None,
    }
    if entry.get("inputs_source") == "get_inputs" and fp is not None:
        head["inputs_sha256"] = fp.inputs_sha256
    rest = {k: v for k, v in entry.items() if k not in head and k != "files"}
    return {**head, **rest, "files": dict(sorted(files.items()))}


def check_can_apply(plan: WriteBackPlan, *, commit: bool, allow_dirty: bool) -> list[str]:
    """Raise WriteBackRefused when applying could lose the user's work; returns dirty paths allowed."""
    from cuda_agent_cli.writeback.git import dirty_paths

    if not plan.in_git and commit:
        raise refusal.not_in_git(plan.repo_root / plan.module_rel)
    module = plan.repo_root / plan.module_rel
    current = hashlib.sha256(module.read_bytes()).hexdigest() if module.is_file() else None
    if current != plan.module_sha256:
        raise WriteBackRefused(
            f"{plan.module_rel} changed since the session read it",
            "run optimize again on the current version (or save this diff with --patch FILE)",
        )
    if not plan.in_git:
        return []
    dirty = dirty_paths(plan.repo_root, [c.path for c in plan.changes])
    if dirty and not allow_dirty:
        raise refusal.dirty(dirty)
    return dirty


def apply_plan(plan: WriteBackPlan, *, commit: bool, allow_dirty: bool) -> ApplyResult:
    """Write the changes (and commit them on a new branch when asked and safe)."""
    from cuda_agent_cli.writeback.git import commit_on_new_branch

    dirty = check_can_apply(plan, commit=commit, allow_dirty=allow_dirty)
    write_changes(plan.repo_root, plan.changes)
    result = ApplyResult(written=[c.path for c in plan.changes])
    if not commit or not plan.in_git:
        return result
    if dirty:
        # Committing would sweep the user's pending edits of these files into our commit.
        result.notes.append(f"not committed: {', '.join(dirty)} had uncommitted changes (--allow-dirty)")
        return result
    info = commit_on_new_branch(
        plan.repo_root,
        [c.path for c in plan.changes],
        plan.commit_message,
        plan.branch or f"cuda-agent/{int(time.time())}",
    )
    result.branch, result.commit, result.previous_branch = info.branch, info.commit, info.previous_branch
    return result

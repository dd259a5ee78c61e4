"""`optimize --all`: the repository's configured targets, one session each, and what makes a rerun
resume: the progress file in the session store.

The progress of a repository lives in `<data dir>/optimize-all/<repo key>.jsonl`, one line per
finished target: its target spec (target and inputs), the hash of its module's source (without
the lines a write-back added) and the result object `optimize --batch --json` printed. A rerun
skips a target whose spec and source hash match a finished line; an error (bad input, missing
environment) or an interrupted session is not finished and runs again.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent_cli.config import TargetSetting
from cuda_agent_cli.errors import BadInput

PROGRESS_DIR = "optimize-all"


def source_hash(target: str, cwd: Path) -> str | None:
    """sha256 of the module a target names, as the user wrote it (an integration left out), or
    None when the file cannot be found without importing it."""
    from cuda_agent_cli.errors import TargetError
    from cuda_agent_cli.task.target import parse_target
    from cuda_agent_cli.writeback.fingerprint import unpatched_candidates

    try:
        t = parse_target(target, cwd)
    except TargetError:
        return None
    file = t.file
    if file is None:
        rel = Path(*t.module_name.split("."))
        found = [p / rel.with_suffix(".py") for p in t.import_paths] + [p / rel / "__init__.py" for p in t.import_paths]
        file = next((f for f in found if f.is_file()), None)
    if file is None:
        return None
    text = file.read_text(errors="replace")
    return hashlib.sha256(unpatched_candidates(text, t.class_name)[0].encode()).hexdigest()


def progress_path(data_dir: Path, repo_root: Path) -> Path:
    key = hashlib.sha256(str(repo_root.resolve()).encode()).hexdigest()[:16]
    return data_dir / PROGRESS_DIR / f"{repo_root.name}-{key}.jsonl"


@dataclass
class Progress:
    """The finished targets of one repository, read once and appended to as targets finish."""

    path: Path
    done: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (spec, hash) -> result
    cut_short: bool = False  # the file's last line has no end: a run was killed while writing it

    @classmethod
    def load(cls, path: Path) -> "Progress":
        """The progress file at `path`, refused (exit 2, before any session runs) when it is not
        one this command wrote or could not take the next line: else a paid session's record
        would be lost, and the target paid for again on the next run."""
        from cuda_agent_cli.preflight import cannot_create

        p = cls(path)
        problem = cannot_create(path.parent)
        if problem:
            raise BadInput(f"the progress file of optimize --all cannot be kept in {path.parent}: {problem}", _HINT)
        if not (path.exists() or path.is_symlink()):
            return p
        if not path.is_file():
            raise BadInput(f"the progress file {path} of optimize --all is not a file", _MOVE_IT)
        try:
            text = path.read_text(encoding="utf-8")
            with open(path, "a", encoding="utf-8"):
                pass  # it must take the next line too
        except UnicodeDecodeError:
            raise BadInput(f"the progress file {path} of optimize --all is not UTF-8 text", _MOVE_IT) from None
        except OSError as exc:
            raise BadInput(
                f"the progress file {path} of optimize --all cannot be used: {exc.strerror or exc}", _MOVE_IT
            ) from None
        for n, line in enumerate(text.splitlines(), 1):
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a line cut short by a killed run: that target runs again
            if not _is_record(rec):
                raise BadInput(f"{path} line {n} is not a record of optimize --all", _MOVE_IT)
            p.done[(rec["spec"], rec["source_sha256"])] = rec["result"]
        p.cut_short = bool(text) and not text.endswith("\n")
        return p

    def finished(self, entry: TargetSetting, source: str | None) -> dict[str, Any] | None:
        return self.done.get((entry.key(), source)) if source else None

    def record(self, entry: TargetSetting, source: str | None, result: dict[str, Any]) -> None:
        if not source:
            return
        self.done[(entry.key(), source)] = result
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(
            {
                "spec": entry.key(),
                "target": entry.target,
                "inputs": entry.inputs,
                "source_sha256": source,
                "result": result,
            }
        )
        # After a line cut short, a new line first: glued to it, this record would be unreadable.
        start = "\n" if self.cut_short else ""
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(start + line + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.cut_short = False


_HINT = "set XDG_DATA_HOME (or data_dir in the config) to a folder you can write to"
_MOVE_IT = "move it away (the targets it recorded as finished then run again), or set data_dir to another folder"


def _is_record(rec: Any) -> bool:
    return (
        isinstance(rec, dict)
        and isinstance(rec.get("spec"), str)
        and isinstance(rec.get("source_sha256"), str)
        and isinstance(rec.get("result"), dict)
    )


def summary(results: list[dict[str, Any]], skipped: int) -> dict[str, Any]:
    """The last line of `optimize --all --batch --json`."""
    counts: dict[str, int] = {}
    failures = []
    for r in results:
        if r.get("status") == "error":
            key = "error"
        else:
            key = "none" if r.get("reward") is None else str(r["reward"])
        counts[key] = counts.get(key, 0) + 1
        if r.get("status") not in ("improved", "correct"):
            failures.append(
                {
                    "target": r.get("target"),
                    "status": r.get("status"),
                    "reason": r.get("error") or r.get("stop_detail") or r.get("stop_reason"),
                }
            )
    correct = sum(r.get("status") in ("improved", "correct") for r in results)
    return {
        "summary": True,
        "targets": len(results),
        "ran": len(results) - skipped,
        "skipped": skipped,
        "improved": sum(r.get("status") == "improved" for r in results),
        "correct": correct,
        "by_reward": dict(sorted(counts.items())),
        "failures": failures,
        "cost_usd": round(sum(float(r.get("cost_usd") or 0.0) for r in results), 6),
        "exit_code": 0 if correct == len(results) else 1,
    }

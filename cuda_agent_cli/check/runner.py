"""`check`: which kernels, which checks, one status each, and the refreshed record on --update.

Returns a CheckReport; rendering it (table, JSON, JUnit, GitHub, SARIF) is check.report's job
and printing it the CLI's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from cuda_agent_cli.check.status import (
    DEFAULT_THRESHOLD,
    Finding,
    Status,
    compare,
    decide,
    exit_code,
    parse_threshold,
    slower_than_compile,
)
from cuda_agent_cli.errors import BadInput
from cuda_agent_cli.writeback.manifest import MANIFEST_PATH

if TYPE_CHECKING:
    from cuda_agent_cli.harness_result import HarnessResult

# Findings after which the harness has nothing it could run.
_CANNOT_RUN = {
    "module-missing",
    "folder-missing",
    "class-gone",
    "no-module-file",
    "no-folder",
    "source-missing",
    "no-gpu",
    "no-cuda",
    "no-torch",
}
# Static gaps of an old record that a passing verification makes up for.
_RECORD_GAPS = {"no-hashes", "no-fingerprint"}


@dataclass
class CheckRequest:
    paths: list[Path] = field(default_factory=list)
    cwd: Path = field(default_factory=Path.cwd)
    fast: bool = False
    threshold: str | float | None = None
    changed_since: str | None = None
    strict: bool = False
    update: bool = False


@dataclass
class KernelReport:
    target: str
    device: str
    status: Status
    findings: list[Finding]
    module_file: str | None
    line: int | None
    recorded: dict[str, Any]
    measured: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    updated: bool = False
    fast: bool = False

    @property
    def effective(self) -> Status:
        """What counts for the exit code: a record refreshed with --update is current again."""
        return Status.OK if self.updated else self.status

    def message(self) -> str:
        main = [f.message for f in self.findings if f.status == self.status]
        if main:
            return "; ".join(main)
        if self.status == Status.OK:
            return (
                "sources, reference and architecture as recorded (static checks)"
                if self.fast
                else "verified, current and as fast as recorded"
            )
        return self.status.value

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "device": self.device,
            "status": self.status.value,
            "message": self.message(),
            "findings": [
                {"status": f.status.value, "code": f.code, "message": f.message, "file": f.file, "line": f.line}
                for f in self.findings
            ],
            "file": self.module_file,
            "line": self.line,
            "recorded": self.recorded,
            "measured": self.measured,
            "notes": self.notes,
            "seconds": round(self.seconds, 3),
            "updated": self.updated,
        }


@dataclass
class CheckReport:
    root: Path
    manifest: Path | None
    mode: str  # "fast" | "full"
    threshold: float
    strict: bool
    kernels: list[KernelReport]
    notes: list[str] = field(default_factory=list)
    machine: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    updated_manifest: bool = False

    @property
    def exit_code(self) -> int:
        return exit_code([k.effective for k in self.kernels], self.strict)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for k in self.kernels:
            out[k.status.value] = out.get(k.status.value, 0) + 1
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "root": str(self.root),
            "manifest": str(self.manifest) if self.manifest else None,
            "mode": self.mode,
            "threshold": self.threshold,
            "strict": self.strict,
            "exit_code": self.exit_code,
            "counts": self.counts(),
            "kernels": [k.to_json() for k in self.kernels],
            "notes": self.notes,
            "machine": self.machine,
            "seconds": round(self.seconds, 3),
            "updated_manifest": self.updated_manifest,
        }


# ---------------------------------------------------------------- where and what


def _manifest_root(start: Path) -> tuple[Path, Path | None]:
    """The repository root holding .cuda-agent/kernels.toml at or above `start` (not past .git)."""
    for d in (start, *start.parents):
        if (d / MANIFEST_PATH).is_file():
            return d, d / MANIFEST_PATH
        if (d / ".git").exists():
            return d, None
    return start, None


def locate(paths: list[Path], cwd: Path) -> tuple[Path, Path | None, set[str] | None]:
    """(root, manifest path or None, files to limit the check to or None for all)."""
    resolved = [(cwd / p).resolve() if not p.is_absolute() else p.resolve() for p in paths]
    for p, given in zip(resolved, paths):
        if not p.exists():
            raise BadInput(f"{given}: no such file or directory", "pass the repository folder or files inside it")
    dirs = [p for p in resolved if p.is_dir()]
    if len(dirs) > 1 or (dirs and len(resolved) > 1):
        raise BadInput("pass one repository folder, or files inside one repository", "cuda-agent check [PATH]")
    if dirs:
        root, manifest = _manifest_root(dirs[0])
        return root, manifest, None
    if not resolved:
        root, manifest = _manifest_root(cwd.resolve())
        return root, manifest, None
    root, manifest = _manifest_root(resolved[0].parent)
    files = set()
    for p in resolved:
        try:
            files.add(p.relative_to(root).as_posix())
        except ValueError:
            continue
    return root, manifest, files


def touches(entry: dict[str, Any], files: set[str]) -> bool:
    if MANIFEST_PATH in files or (entry.get("module_file") and entry["module_file"] in files):
        return True
    folder = str(entry.get("folder") or "")
    return bool(folder) and any(f.startswith(folder + "/") for f in files)


def resolve_threshold(flag: str | float | None, root: Path) -> float:
    from cuda_agent_cli.config import section

    if flag is not None:
        return parse_threshold(flag, "--threshold")
    table, where = section("check", root)
    if "threshold" in table:
        return parse_threshold(table["threshold"], where or "[tool.cuda-agent.check]")
    unknown = sorted(set(table) - {"threshold"})
    if unknown:
        raise BadInput(f"{where}: unknown setting `{unknown[0]}`", "known settings: threshold")
    return DEFAULT_THRESHOLD


# ---------------------------------------------------------------- one kernel


def _recorded(entry: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "speedup_vs_eager",
        "speedup_vs_eager_interval",
        "speedup_vs_compile",
        "speedup_vs_compile_interval",
        "speedup_per_call",
        "speedup_per_call_interval",
        "speedup_compiled",
        "speedup_compiled_interval",
        "best_baseline",
        "speedup_vs_best",
        "speedup_vs_best_interval",
        "fraction_of_peak",
        "eager_us",
        "compile_us",
        "kernel_us",
        "method",
        "arch",
        "gpu",
        "torch",
        "cuda",
        "reward",
    )
    return {k: entry[k] for k in keys if k in entry}


def _first_line(text: str, limit: int = 300) -> str:
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    return lines[0][:limit] if lines else ""


def runtime_findings(entry: dict[str, Any], result: HarnessResult, threshold: float) -> list[Finding]:
    """Findings from a profile result against the record."""
    module = entry.get("module_file")
    if not result.compiled:
        first = _first_line("\n".join(result.errors)) or "see the compiler log"
        return [Finding(Status.BROKEN, f"the kernel no longer compiles: {first}", module, code="compile-failed")]
    if not result.correct:
        what = "; ".join(f"{c.name}: {_first_line(c.detail, 160)}" for c in result.failed_checks()[:3]) or _first_line(
            "\n".join(result.errors)
        )
        return [Finding(Status.BROKEN, f"the kernel fails verification now ({what})", module, code="verify-failed")]
    t = result.timings
    if not t:
        return [
            Finding(Status.NOT_MEASURED, "verified, but the harness returned no timings", module, code="no-timings")
        ]
    measured = {
        "speedup_vs_eager": (t.speedup_vs_eager, t.speedup_vs_eager_interval),
        "speedup_vs_compile": (t.speedup_vs_compile, t.speedup_vs_compile_interval),
    }
    out: list[Finding] = []
    for label, key in (("eager", "speedup_vs_eager"), ("torch.compile", "speedup_vs_compile")):
        rec = entry.get(key)
        if not isinstance(rec, (int, float)) or rec <= 0:
            continue
        now, interval = measured[key]
        c = compare(float(rec), entry.get(f"{key}_interval"), now, _as_list(interval, now), threshold)
        if c.verdict == "regressed":
            out.append(
                Finding(
                    Status.REGRESSED,
                    f"{now:.2f}x vs {label}, recorded {rec:.2f}x "
                    f"({c.change:+.0%}; counts beyond -{c.limit:.0%}){c.detail}",
                    module,
                    code=f"regressed-{key}",
                )
            )
        elif c.verdict == "improved":
            out.append(
                Finding(
                    Status.IMPROVED,
                    f"{now:.2f}x vs {label}, recorded {rec:.2f}x ({c.change:+.0%}): "
                    "refresh the record with `cuda-agent check --update`",
                    module,
                    code=f"improved-{key}",
                )
            )
    if slower_than_compile(
        _as_list(t.speedup_vs_compile_interval, t.speedup_vs_compile),
        t.speedup_vs_compile,
        entry.get("speedup_vs_compile"),
        entry.get("speedup_vs_compile_interval"),
    ):
        out.append(
            Finding(
                Status.SLOWER_THAN_COMPILE,
                f"{t.speedup_vs_compile:.2f}x vs torch.compile: slower than torch.compile now",
                module,
                code="slower-than-compile",
            )
        )
    return out


def _as_list(interval: tuple[float, float] | None, point: float) -> list[float]:
    # As the JSON object holds it (docs/architecture.md, "Contracts"): a result without a measured
    # spread has the point twice, which the status rules read as an interval of no width.
    return list(interval) if interval is not None else [point, point]


def check_kernel(
    root: Path, entry: dict[str, Any], machine: Any, *, fast: bool, threshold: float, atol: float, rtol: float
) -> KernelReport:
    from cuda_agent_cli.check.static import class_line, static_findings

    start = time.perf_counter()
    findings = static_findings(root, entry, machine)
    module_rel = entry.get("module_file")
    cls = str(entry.get("class") or "")
    line = None
    if module_rel and (root / module_rel).is_file():
        line = class_line((root / module_rel).read_text(errors="replace"), cls)
    report = KernelReport(
        target=str(entry["target"]),
        device=str(entry.get("device") or "cuda"),
        status=Status.OK,
        findings=findings,
        module_file=module_rel,
        line=line,
        recorded=_recorded(entry),
        fast=fast,
    )
    for f in findings:
        if f.file == module_rel and f.line is None and f.status != Status.NOT_MEASURED:
            findings[findings.index(f)] = Finding(f.status, f.message, f.file, line, f.code)
    if fast:
        if not any(f.status in (Status.BROKEN, Status.STALE, Status.NEW_ARCH, Status.NOT_MEASURED) for f in findings):
            report.notes.append("static checks only (--fast): not compiled, verified or timed")
    elif any(f.code in _CANNOT_RUN for f in findings):
        report.notes.append("not verified or timed: " + next(f.message for f in findings if f.code in _CANNOT_RUN))
    else:
        from cuda_agent_cli.check.measure import measure

        m = measure(root, entry, atol=atol, rtol=rtol)
        if m.not_measured:
            findings.append(Finding(Status.NOT_MEASURED, m.not_measured, module_rel, line, "environment"))
        elif m.error:
            findings.append(
                Finding(Status.BROKEN, f"the target cannot be loaded: {m.error}", module_rel, line, "target-error")
            )
        elif m.result is not None:
            as_json = m.result.to_json()
            report.measured = {
                "correct": m.result.correct,
                "reward": m.result.reward,
                "timings": as_json["timings"],
                "environment": as_json["environment"],
                "failed_checks": [c.name for c in m.result.failed_checks()],
            }
            new = runtime_findings(entry, m.result, threshold)
            for f in new:
                findings.append(Finding(f.status, f.message, f.file, line if f.file == module_rel else f.line, f.code))
            measured_gpu = m.result.environment.get("gpu")
            unknown = [f for f in findings if f.code == "gpu-unknown"]
            for f in unknown:
                findings.remove(f)
            if unknown and entry.get("gpu") and measured_gpu and measured_gpu != entry["gpu"]:
                findings.append(
                    Finding(
                        Status.NEW_ARCH, f"verified on {entry['gpu']}, this machine has {measured_gpu}", code="gpu-arch"
                    )
                )
            if m.result.correct:
                gaps = [f for f in findings if f.code in _RECORD_GAPS]
                for f in gaps:
                    findings.remove(f)
                if gaps:
                    report.notes.append(
                        "the record lacks hashes or a fingerprint (older cuda-agent); verified and "
                        "timed instead: `cuda-agent check --update` records them"
                    )
                if any(f.status == Status.STALE for f in findings):
                    report.notes.append(
                        "it still verifies against the current reference on the recorded inputs: "
                        "`cuda-agent check --update` records that"
                    )
    report.status = decide(findings)
    report.seconds = time.perf_counter() - start
    return report


# ---------------------------------------------------------------- the refreshed record


def refreshed_entry(root: Path, entry: dict[str, Any], measured: dict[str, Any], machine: Any) -> dict[str, Any]:
    """The entry as `check --update` rewrites it: fingerprints and hashes of today's files, and
    the numbers and environment of today's measurement."""
    from cuda_agent_cli.writeback.fingerprint import class_fingerprint, folder_hashes

    e = {k: v for k, v in entry.items() if k not in ("migrated_from", "files")}
    source = (root / entry["module_file"]).read_text()
    fp = class_fingerprint(source, str(entry.get("class")))
    if fp is not None:
        e["reference_sha256"], e["signature"] = fp.sha256, fp.signature
        if entry.get("inputs_source") == "get_inputs":
            e["inputs_sha256"] = fp.inputs_sha256
    t = measured.get("timings") or {}
    env = measured.get("environment") or {}
    device = str(entry.get("device") or "cuda")
    e.update(
        {
            "arch": machine.arch(device, env.get("gpu")) or e.get("arch") or "",
            "gpu": env.get("gpu") or "",
            "torch": env.get("torch") or machine.torch or "",
            "cuda": env.get("cuda") or None,
            "reward": measured.get("reward"),
            "eager_us": t.get("eager_us"),
            "compile_us": t.get("compile_us"),
            "kernel_us": t.get("candidate_us"),
            "speedup_vs_eager": t.get("speedup_vs_eager"),
            "speedup_vs_eager_interval": t.get("speedup_vs_eager_interval"),
            "speedup_vs_compile": t.get("speedup_vs_compile"),
            "speedup_vs_compile_interval": t.get("speedup_vs_compile_interval"),
            "best_baseline": t.get("best_baseline"),
            "speedup_vs_best": t.get("speedup_vs_best"),
            "speedup_vs_best_interval": t.get("speedup_vs_best_interval"),
            "fraction_of_peak": t.get("fraction_of_peak"),
            "method": t.get("method") or "",
            "trials": t.get("trials"),
            "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
    )
    if device == "cpu":
        e["cpu"] = machine.cpu_name
    e["files"] = folder_hashes(root / entry["folder"])
    return {k: v for k, v in e.items() if v is not None}


# ---------------------------------------------------------------- the whole check


def run_check(req: CheckRequest, on_kernel: Callable[[KernelReport], None] | None = None) -> CheckReport:
    from cuda_agent_cli.config import load_config
    from cuda_agent_cli.machine import this_machine
    from cuda_agent_cli.writeback.manifest import load_manifest, replaced_entries

    start = time.perf_counter()
    if req.update and req.fast:
        raise BadInput("--update records new measurements, and --fast measures nothing", "drop --fast to update")
    root, manifest, files = locate(req.paths, req.cwd)
    threshold = resolve_threshold(req.threshold, root)
    machine = this_machine()
    if machine.torch is None and not req.fast and manifest is not None:
        from cuda_agent_cli.errors import EnvironmentMissing

        raise EnvironmentMissing(
            "torch is not installed here, and the full check runs every kernel through it",
            "pip install torch, or run `cuda-agent check --fast` (static checks only)",
        )
    report = CheckReport(
        root=root,
        manifest=manifest,
        mode="fast" if req.fast else "full",
        threshold=threshold,
        strict=req.strict,
        kernels=[],
        machine={
            "torch": machine.torch,
            "cuda": machine.cuda,
            "cpu_arch": machine.cpu_arch,
            "gpus": [{"name": g.name, "arch": g.arch} for g in machine.gpus],
        },
    )
    if manifest is None:
        report.notes.append(f"no {MANIFEST_PATH} in {root}: no integrated kernels to check")
        report.seconds = time.perf_counter() - start
        return report
    text = manifest.read_text()
    entries = load_manifest(text).kernels
    if files is not None:
        entries = [e for e in entries if touches(e, files)]
        if not entries:
            report.notes.append("none of the given files belongs to an integrated kernel")
    if req.changed_since:
        from cuda_agent_cli.writeback.git import changed_files

        changed = changed_files(root, req.changed_since)
        entries = [e for e in entries if touches(e, changed)]
        if not entries:
            report.notes.append(f"no integrated kernel changed since {req.changed_since}")
    cfg = load_config({}, cwd=root)
    for entry in entries:
        k = check_kernel(root, entry, machine, fast=req.fast, threshold=threshold, atol=cfg.atol, rtol=cfg.rtol)
        report.kernels.append(k)
        if on_kernel is not None:
            on_kernel(k)
    if req.update:
        updates = {}
        for k, entry in zip(report.kernels, entries):
            if k.measured and k.measured.get("correct") and k.measured.get("timings"):
                updates[k.target] = refreshed_entry(root, entry, k.measured, machine)
                k.updated = True
        if updates:
            new_text = replaced_entries(text, updates)
            tmp = manifest.with_suffix(".toml.tmp")
            tmp.write_text(new_text)
            tmp.replace(manifest)
            report.updated_manifest = True
    report.seconds = time.perf_counter() - start
    return report

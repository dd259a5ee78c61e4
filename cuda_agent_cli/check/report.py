"""A CheckReport as text for people, JUnit XML, GitHub annotations and summary, and SARIF 2.1.0.
Pure functions from the report to strings; the CLI writes them."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

from cuda_agent_cli import __version__
from cuda_agent_cli.check.runner import CheckReport, KernelReport
from cuda_agent_cli.check.status import FAILING, MEANING, Status

MAX_ANNOTATIONS = 10


def _speed(d: dict[str, Any] | None, key: str) -> str:
    if not d:
        return "-"
    v = d.get(key)
    return f"{v:.2f}x" if isinstance(v, (int, float)) else "-"


def _measured(k: KernelReport, key: str) -> str:
    return _speed((k.measured or {}).get("timings"), key)


def _fraction(k: KernelReport) -> str:
    v = ((k.measured or {}).get("timings") or {}).get("fraction_of_peak")
    return f"{100 * v:.1f}%" if isinstance(v, (int, float)) else "-"


def table(report: CheckReport) -> list[str]:
    """Lines of the human table: one row per kernel, then what each non-OK status means."""
    rows = [
        (
            "STATUS",
            "KERNEL",
            "DEVICE",
            "VS EAGER (rec -> now)",
            "VS COMPILE (rec -> now)",
            "VS BEST (rec -> now)",
            "OF PEAK (now)",
            "PER CALL (rec)",
        )
    ]
    for k in report.kernels:
        status = k.status.value + (" (updated)" if k.updated else "")
        rows.append(
            (
                status,
                k.target,
                k.device,
                f"{_speed(k.recorded, 'speedup_vs_eager')} -> {_measured(k, 'speedup_vs_eager')}",
                f"{_speed(k.recorded, 'speedup_vs_compile')} -> {_measured(k, 'speedup_vs_compile')}",
                # against the fastest baseline timed (max-autotune, CUDA graphs), and how close to
                # the hardware's speed of light
                f"{_speed(k.recorded, 'speedup_vs_best')} -> {_measured(k, 'speedup_vs_best')}",
                _fraction(k),
                # as the user's Python calls the module, host work included (device time before it),
                # and under torch.compile where the repository compiles it
                _speed(k.recorded, "speedup_per_call")
                + (
                    f", compiled {_speed(k.recorded, 'speedup_compiled')}"
                    if (k.recorded or {}).get("speedup_compiled") is not None
                    else ""
                ),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows] if report.kernels else []
    for k in report.kernels:
        if k.status != Status.OK or k.notes:
            out.append(f"{k.target}: {k.status.value}: {k.message()}")
            for n in k.notes:
                out.append(f"  note: {n}")
    out.extend(report.notes)
    counts = ", ".join(f"{n} {s}" for s, n in sorted(report.counts().items()))
    verdict = "failed" if report.exit_code else "passed"
    out.append(
        f"check {verdict} ({report.mode}, {len(report.kernels)} kernel{'s' if len(report.kernels) != 1 else ''}"
        + (f": {counts}" if counts else "")
        + f", {report.seconds:.1f} s)"
    )
    return out


def to_json(report: CheckReport) -> str:
    return json.dumps(report.to_json())


def _fails(k: KernelReport, strict: bool) -> bool:
    return k.effective in FAILING or (strict and k.effective == Status.NOT_MEASURED)


def junit(report: CheckReport) -> str:
    """JUnit XML: one testcase per kernel; failing statuses are failures, NOT-MEASURED skipped
    (a failure with --strict)."""
    suites = ET.Element("testsuites", name="cuda-agent check")
    failures = sum(1 for k in report.kernels if _fails(k, report.strict))
    skipped = sum(1 for k in report.kernels if not _fails(k, report.strict) and k.effective == Status.NOT_MEASURED)
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=f"cuda-agent check ({report.mode})",
        tests=str(len(report.kernels)),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
        time=f"{report.seconds:.3f}",
    )
    for k in report.kernels:
        case = ET.SubElement(
            suite, "testcase", classname=f"cuda-agent.{k.device}", name=k.target, time=f"{k.seconds:.3f}"
        )
        if k.module_file:
            case.set("file", k.module_file)
        if _fails(k, report.strict):
            f = ET.SubElement(case, "failure", type=k.status.value, message=f"{k.status.value}: {k.message()}")
            f.text = "\n".join([MEANING[k.status], *(x.message for x in k.findings), *k.notes])
        elif k.effective == Status.NOT_MEASURED:
            ET.SubElement(case, "skipped", message=f"NOT-MEASURED: {k.message()}")
        out = ET.SubElement(case, "system-out")
        out.text = json.dumps({"status": k.status.value, "recorded": k.recorded, "measured": k.measured})
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _locations(k: KernelReport) -> list[tuple[str | None, int | None, str]]:
    """(file, line, message) per annotation of a kernel: each finding of its status."""
    main = [f for f in k.findings if f.status == k.status]
    if not main:
        return [(k.module_file, k.line, k.message())]
    return [
        (f.file or k.module_file, f.line or (k.line if (f.file or k.module_file) == k.module_file else None), f.message)
        for f in main
    ]


def github_annotations(report: CheckReport) -> list[str]:
    """Workflow commands: ::error for failing statuses, ::warning for NOT-MEASURED, ::notice for
    IMPROVED; at most MAX_ANNOTATIONS in all, errors first."""
    ranked: list[tuple[int, str]] = []
    for k in report.kernels:
        if k.updated:
            continue
        level = (
            "error"
            if _fails(k, report.strict)
            else "warning"
            if k.status == Status.NOT_MEASURED
            else "notice"
            if k.status == Status.IMPROVED
            else None
        )
        if level is None:
            continue
        for file, line, message in _locations(k):
            props = [f"title={_escape_property(f'cuda-agent check: {k.status.value} {k.target}')}"]
            if file:
                props.insert(0, f"file={_escape_property(file)}")
                if line:
                    props.insert(1, f"line={line}")
            ranked.append(
                (
                    {"error": 0, "warning": 1, "notice": 2}[level],
                    f"::{level} {','.join(props)}::{_escape_data(message)}",
                )
            )
    ranked.sort(key=lambda r: r[0])
    lines = [r[1] for r in ranked[:MAX_ANNOTATIONS]]
    if len(ranked) > MAX_ANNOTATIONS:
        lines.append(
            f"::notice title=cuda-agent check::{len(ranked) - MAX_ANNOTATIONS} more findings are in the job summary"
        )
    return lines


def markdown_summary(report: CheckReport) -> str:
    verdict = "failed" if report.exit_code else "passed"
    out = [
        f"## cuda-agent check {verdict}",
        "",
        f"{len(report.kernels)} kernel(s), {report.mode} mode, regression threshold {report.threshold:.0%}, "
        f"{report.seconds:.1f} s.",
        "",
    ]
    if report.kernels:
        out += [
            "| Status | Kernel | Device | vs eager (recorded → now) | vs torch.compile (recorded → now) "
            "| vs best baseline (recorded → now) | of peak | Details |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for k in report.kernels:
            detail = k.message().replace("|", "\\|")
            if k.notes:
                detail += "<br>" + "<br>".join(n.replace("|", "\\|") for n in k.notes)
            out.append(
                f"| {k.status.value}{' (updated)' if k.updated else ''} | `{k.target}` | {k.device} | "
                f"{_speed(k.recorded, 'speedup_vs_eager')} → {_measured(k, 'speedup_vs_eager')} | "
                f"{_speed(k.recorded, 'speedup_vs_compile')} → {_measured(k, 'speedup_vs_compile')} | "
                f"{_speed(k.recorded, 'speedup_vs_best')} → {_measured(k, 'speedup_vs_best')} | {_fraction(k)} | "
                f"{detail} |"
            )
        out.append("")
    out += [f"- {n}" for n in report.notes]
    return "\n".join(out).rstrip() + "\n"


def sarif(report: CheckReport) -> str:
    """SARIF 2.1.0: one rule per status, one result per finding of a kernel's status (OK kernels
    have none)."""
    rules = [
        {
            "id": s.value,
            "name": s.name.title().replace("_", ""),
            "shortDescription": {"text": MEANING[s]},
            "defaultConfiguration": {
                "level": "error" if s in FAILING else "warning" if s == Status.NOT_MEASURED else "note"
            },
        }
        for s in Status
        if s != Status.OK
    ]
    index = {r["id"]: i for i, r in enumerate(rules)}
    results = []
    for k in report.kernels:
        if k.status == Status.OK:
            continue
        level = "error" if _fails(k, report.strict) else "warning" if k.status == Status.NOT_MEASURED else "note"
        for file, line, message in _locations(k):
            result: dict[str, Any] = {
                "ruleId": k.status.value,
                "ruleIndex": index[k.status.value],
                "level": level,
                "message": {"text": f"{k.target}: {message}"},
                "properties": {"target": k.target, "device": k.device, "updated": k.updated},
            }
            if file:
                region = {"startLine": line} if line else None
                loc: dict[str, Any] = {"artifactLocation": {"uri": file, "uriBaseId": "SRCROOT"}}
                if region:
                    loc["region"] = region
                result["locations"] = [{"physicalLocation": loc}]
            results.append(result)
    doc = {
        "$schema": "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "cuda-agent check", "version": __version__, "rules": rules}},
                "originalUriBaseIds": {"SRCROOT": {"uri": report.root.as_uri() + "/"}},
                "invocations": [{"executionSuccessful": True, "exitCode": report.exit_code}],
                "results": results,
            }
        ],
    }
    return json.dumps(doc, indent=2) + "\n"

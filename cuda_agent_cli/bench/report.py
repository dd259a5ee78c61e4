"""report.md and a self-contained report.html (plots embedded as base64 PNG) from a summary.

matplotlib is optional (`pip install 'cuda-agent[report]'`) and imported only here, when a report
is written; without it report.html says how to get the plots and keeps every table.
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path
from typing import Any, Sequence

from cuda_agent_cli.bench.metrics import FAST_P, fast_p, speedup

NO_PLOTS = "plots need matplotlib: pip install 'cuda-agent[report]'"


def _pct(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}%"


def _x(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f}x"


def _geo(block: dict[str, Any]) -> str:
    if block.get("value") is None:
        return "n/a"
    ci = block.get("ci95") or [None, None]
    return f"{block['value']:.2f}x [{ci[0]:.2f}, {ci[1]:.2f}] (n={block['n']})"


def _spread(s: dict[str, float] | None, fmt: str) -> str:
    if not s:
        return "n/a"
    return f"total {format(s['total'], fmt)}, mean {format(s['mean'], fmt)}, median {format(s['median'], fmt)}"


def headline_rows(summary: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(metric, ours, the paper's) for the table that puts our run beside the published one."""
    o, paper = summary["overall"], summary["paper"]
    g = o["geomean"]
    return [
        ("tasks", str(o["tasks"]), ""),
        ("pass rate", _pct(o["pass_rate"]), _pct(paper["pass_rate"])),
        ("faster than eager by >5%", _pct(o["faster_than_eager"]), ""),
        ("faster than torch.compile by >5%", _pct(o["faster_than_compile"]), _pct(paper["faster_than_compile"])),
        (
            "geomean vs torch.compile (correct only)",
            _geo(g["compile"]["correct_only"]),
            _x(paper["geomean_vs_compile"]),
        ),
        ("geomean vs torch.compile (failures as 1.0)", _geo(g["compile"]["failures_as_one"]), ""),
        ("geomean vs eager (correct only)", _geo(g["eager"]["correct_only"]), ""),
        ("geomean vs eager (failures as 1.0)", _geo(g["eager"]["failures_as_one"]), ""),
        ("faster than the best baseline by >5%", _pct(o.get("faster_than_best")), ""),
        ("geomean vs the best baseline (correct only)", _geo(g["best"]["correct_only"]), ""),
        ("geomean vs the best baseline (failures as 1.0)", _geo(g["best"]["failures_as_one"]), ""),
        ("fraction of peak, median over correct tasks", _pct((o.get("fraction_of_peak") or {}).get("median")), ""),
    ]


def level_rows(summary: dict[str, Any]) -> list[list[str]]:
    rows = []
    for name, m in [*summary["levels"].items(), ("overall", summary["overall"])]:
        fp = m["fast_p"]["eager"]
        rows.append(
            [
                name,
                str(m["tasks"]),
                _pct(m["pass_rate"]),
                _pct(m["faster_than_eager"]),
                _pct(m["faster_than_compile"]),
                _pct(m.get("faster_than_best")),
                *[_pct(fp[f"{p:g}"]) for p in FAST_P],
                _x(m["geomean"]["compile"]["correct_only"]["value"]),
                _x(m["geomean"]["best"]["correct_only"]["value"]),
                _pct((m.get("fraction_of_peak") or {}).get("median")),
                " ".join(f"{k}:{v}" for k, v in m["rewards"].items() if v),
            ]
        )
    return rows


LEVEL_HEAD = [
    "level",
    "tasks",
    "pass",
    ">5% vs eager",
    ">5% vs compile",
    ">5% vs best",
    *[f"fast_{p:g}" for p in FAST_P],
    "geomean vs compile",
    "geomean vs best",
    "of peak (median)",
    "rewards",
]
TASK_HEAD = [
    "task",
    "status",
    "reward",
    "vs eager",
    "vs compile",
    "vs best",
    "best baseline",
    "of peak",
    "samples",
    "wall s",
    "cost $",
    "note",
]


def task_rows(records: Sequence[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for r in records:
        rows.append(
            [
                r.get("task", ""),
                r.get("status", ""),
                str(r.get("reward")),
                _x(r.get("speedup_vs_eager")) if r.get("correct") else "",
                _x(r.get("speedup_vs_compile")) if r.get("correct") else "",
                _x(speedup(r, "best")) if r.get("correct") else "",
                str(r.get("best_baseline") or "") if r.get("correct") else "",
                _pct(r.get("fraction_of_peak")) if r.get("correct") and r.get("fraction_of_peak") is not None else "",
                f"{r.get('n_correct', 0)}/{r.get('n_samples', 0)}",
                f"{r['wall_s']:.1f}" if isinstance(r.get("wall_s"), (int, float)) else "",
                f"{r['cost_usd']:.3f}" if isinstance(r.get("cost_usd"), (int, float)) else "",
                (r.get("error") or "")[:140],
            ]
        )
    return rows


def _md_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    esc = [[c.replace("|", "\\|").replace("\n", " ") for c in row] for row in rows]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in esc]
    return "\n".join(lines)


def _identity_lines(summary: dict[str, Any]) -> list[str]:
    suite, settings = summary.get("suite", {}), summary.get("settings", {})
    git = suite.get("git") or {}
    commit = (
        f"git {git.get('commit', '')[:12]}{' (modified)' if git.get('dirty') else ''}" if git else "not a git checkout"
    )
    return [
        f"suite: {suite.get('kind')} at {suite.get('root')} ({commit}; task files sha256 "
        f"{str(suite.get('tasks_sha256', ''))[:16]}, {suite.get('tasks')} tasks, {suite.get('selected')} selected)",
        f"mode: {settings.get('mode')}; device {settings.get('device')}; policy {settings.get('policy')}"
        + (f"; model {settings.get('model')}" if settings.get("model") else "")
        + (f"; solutions {settings.get('solutions')}" if settings.get("solutions") else ""),
        f"finished: {summary.get('finished')} of {summary.get('selected')} tasks"
        + (" (interrupted)" if summary.get("interrupted") else ""),
    ]


BASELINE_WORDS = {
    "eager": "eager PyTorch",
    "compile": "torch.compile (default mode)",
    "autotune": "torch.compile max-autotune without CUDA graphs",
    "graphs": "torch.compile reduce-overhead (CUDA-graph replay)",
}


def definitions(summary: dict[str, Any]) -> list[str]:
    """What each number means, so that a reader can set it beside a published figure."""
    settings = summary.get("settings", {})
    timed = summary.get("baselines") or ["eager", "compile"]
    reward_on = settings.get("reward_baseline") or "paper"
    policy = settings.get("policy") or "strict"
    precision = settings.get("precision") or "dtype"
    return [
        "baselines timed, each in the same interleaved window as the kernel: "
        + "; ".join(BASELINE_WORDS.get(b, b) for b in timed),
        "speedup: a baseline's time over the kernel's, the median of per-round paired ratios (device time "
        "of one call, fresh inputs each call); 'best' is the fastest baseline timed for that task",
        "geomean: the geometric mean of per-task speedups with a bootstrap 95% interval over tasks; "
        "'correct only' leaves failed tasks out, 'failures as 1.0' counts each as no speedup",
        "pass rate and '>5%' shares: over every selected task, failures and tasks whose reference did not run "
        "included in the denominator; a '>5%' share counts tasks whose median speedup is above 1.05 (the "
        "reward asks more: the whole 95% interval above 1.05)",
        "reward: -1 incorrect, 1 correct, 2 more than 5% faster than eager, 3 more than 5% faster than eager and "
        + (
            "the best baseline (--reward-baseline best)"
            if reward_on == "best"
            else "default torch.compile (the paper's reward)"
        )
        + ", decided on the speedups' intervals",
        "correct: "
        + (
            "every output within atol = rtol = 1e-2 of eager's, and its error from a float64 reference at "
            "most twice eager's or 1e-2 (--tolerance kernelbench, the paper's rule)"
            if precision == "kernelbench"
            else f"outputs held to {precision} compute's own rounding (--precision {precision})"
            if precision != "dtype"
            else "every output's error from a float64 reference at most 8 times eager's own at the module's dtype "
            "(a float32 module computed in TF32, float16 or bfloat16 fails); module state, changed weights and "
            "every input leaf checked too"
        ),
        f"policy {policy}: "
        + (
            "every tensor op in forward must run in the candidate's own kernels (torch ops are refused)"
            if policy == "strict"
            else "torch ops are allowed next to the candidate's kernels, which must do part of the work"
        ),
        "fraction of peak: the task's speed-of-light time (the larger of the reference's FLOPs over the "
        "device's peak FLOP/s for its dtype and the bytes it must at least move over the memory bandwidth) "
        "over the kernel's time; peaks from a table of known GPUs, or measured on the machine",
    ]


def render_markdown(summary: dict[str, Any], records: Sequence[dict[str, Any]]) -> str:
    o = summary["overall"]
    parts = [
        "# cuda-agent bench report",
        "",
        *[f"- {line}" for line in _identity_lines(summary)],
        "",
        "## Headline, beside the paper's published numbers",
        "",
        _md_table(["metric", "this run", "paper"], headline_rows(summary)),
        "",
        "## Per level",
        "",
        _md_table(LEVEL_HEAD, level_rows(summary)),
        "",
        "## Definitions",
        "",
        *[f"- {line}" for line in definitions(summary)],
        "",
        "## Cost and time per task",
        "",
        f"- cost (USD): {_spread(o['cost_usd'], '.3f')}",
        f"- tokens: {_spread(o['tokens'], '.0f')}",
        f"- turns: {_spread(o['turns'], '.1f')}",
        f"- wall time (s): {_spread(o['wall_s'], '.1f')}",
        f"- pass@k: {', '.join(f'pass@{k} {_pct(v)}' for k, v in o['pass_at_k'].items())}",
        "",
        "## Harness warnings to review",
        "",
    ]
    parts += [f"- {w['task']}: {w['warning']}" for w in summary["warnings"]] or ["none"]
    parts += ["", "## Tasks", "", _md_table(TASK_HEAD, task_rows(records)), ""]
    return "\n".join(parts)


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode()


def plots(summary: dict[str, Any], records: Sequence[dict[str, Any]]) -> dict[str, str]:
    """name -> base64 PNG; raises ImportError without matplotlib."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    out: dict[str, str] = {}
    levels = list(summary["levels"])
    fig, ax = plt.subplots(figsize=(6, 3.2))
    for i, level in enumerate(levels):
        drawn = [
            speedup(r, "compile")
            for r in records
            if (f"level{r.get('level')}" if r.get("level") is not None else "all") == level
        ]
        values = [v for v in drawn if v is not None]
        ax.scatter([i + 1] * len(values), values, alpha=0.7)
        if values:
            ax.boxplot([values], positions=[i + 1], widths=0.4, showfliers=False)
    ax.set_xticks(range(1, len(levels) + 1), levels)
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_yscale("log")
    ax.set_ylabel("speedup vs torch.compile")
    ax.set_title("Speedup of correct tasks, per level")
    out["speedup_per_level"] = _png(fig)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 3.2))
    finite = [s for r in records for s in (speedup(r, "eager"), speedup(r, "compile")) if s]
    top = max([2.5, *finite]) if finite else 2.5
    ps = [top * i / 200 for i in range(201)]
    for base in ("eager", "compile"):
        ax.plot(ps, [fast_p(records, p, base) or 0.0 for p in ps], label=f"vs {base}")
    for p in FAST_P[1:]:
        ax.axvline(p, color="grey", lw=0.5, ls=":")
    ax.set_xlabel("p (speedup threshold)")
    ax.set_ylabel("fast_p")
    ax.set_ylim(0, 1.02)
    ax.legend()
    ax.set_title("fast_p: share of tasks correct and faster than p")
    out["fast_p"] = _png(fig)
    plt.close(fig)

    drawn_roofline = roofline_plot(plt, records)
    if drawn_roofline is not None:
        out["roofline"] = drawn_roofline

    fig, ax = plt.subplots(figsize=(5, 3))
    dist = summary["overall"]["rewards"]
    keys = [k for k in ("-1", "1", "2", "3", "none") if k != "none" or dist.get(k)]
    colors = {"-1": "#c44", "1": "#999", "2": "#6a6", "3": "#284", "none": "#bbb"}
    ax.bar(keys, [dist.get(k, 0) for k in keys], color=[colors[k] for k in keys])
    ax.set_xlabel("reward")
    ax.set_ylabel("tasks")
    ax.set_title("Reward distribution")
    out["rewards"] = _png(fig)
    plt.close(fig)
    return out


def roofline_points(records: Sequence[dict[str, Any]], side: str) -> list[tuple[float, float]]:
    """(FLOP per byte, achieved FLOP/s) of one side for every correct task that does FLOPs."""
    points = []
    for r in records:
        line = r.get("roofline") or {}
        fraction = (line.get("fractions") or {}).get(side)
        if not r.get("correct") or not line.get("flops") or not line.get("bytes") or not fraction:
            continue
        seconds = float(line["sol_us"]) / float(fraction) * 1e-6
        points.append((float(line["flops"]) / float(line["bytes"]), float(line["flops"]) / seconds))
    return points


def roofline_plot(plt: Any, records: Sequence[dict[str, Any]]) -> str | None:
    """The suite on the roofline of its device: the kernels and the best baselines' achieved
    FLOP/s against arithmetic intensity, under the memory and compute ceilings."""
    lines = [r["roofline"] for r in records if r.get("correct") and isinstance(r.get("roofline"), dict)]
    if not lines:
        return None
    kernels = roofline_points(records, "candidate")
    if not kernels:
        return _fractions_plot(plt, records)
    fig, ax = plt.subplots(figsize=(6, 3.6))
    # The ceilings of the first task's peaks (one device per run); other dtypes' compute
    # ceilings drawn beside it.
    bandwidth = float(lines[0]["bandwidth"])
    intensities = [p[0] for p in kernels]
    lo, hi = min(intensities) / 4, max(intensities) * 4
    xs = [lo * (hi / lo) ** (i / 100) for i in range(101)]
    for peak in sorted({float(line["peak_flops"]) for line in lines}):
        ax.plot(xs, [min(peak, bandwidth * x) for x in xs], color="#444", lw=1)
    compile_points = [p for side in ("compile", "autotune", "graphs") for p in roofline_points(records, side)]
    if compile_points:
        ax.scatter(*zip(*compile_points), marker="x", color="#999", label="torch.compile baselines")
    ax.scatter(*zip(*kernels), color="#284", label="kernels")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved FLOP/s")
    ax.set_title(f"Roofline ({lines[0].get('peak_source')})")
    ax.legend(fontsize=8)
    png = _png(fig)
    plt.close(fig)
    return png


def _fractions_plot(plt: Any, records: Sequence[dict[str, Any]]) -> str:
    """Where no task does FLOPs (elementwise work, reductions: all memory-bound), the roofline is
    its memory ceiling alone: each task's fraction of the speed-of-light time, kernel beside
    default torch.compile."""
    rows = [r for r in records if r.get("correct") and isinstance(r.get("roofline"), dict)][:40]
    names = [str(r.get("task", "")).split("/")[-1][:18] for r in rows]
    fractions = [(r["roofline"].get("fractions") or {}) for r in rows]
    fig, ax = plt.subplots(figsize=(max(4.0, 0.5 * len(rows) + 2), 3.4))
    xs = list(range(len(rows)))
    ax.bar([x - 0.2 for x in xs], [f.get("candidate") or 0 for f in fractions], width=0.4, color="#284", label="kernel")
    ax.bar(
        [x + 0.2 for x in xs],
        [f.get("compile") or 0 for f in fractions],
        width=0.4,
        color="#999",
        label="torch.compile",
    )
    ax.set_xticks(xs, names, rotation=45, ha="right", fontsize=7)
    ax.axhline(1.0, color="#444", lw=0.8)
    ax.set_ylabel("fraction of speed of light")
    ax.set_title(f"Memory roofline ({rows[0]['roofline'].get('peak_source')})")
    ax.legend(fontsize=8)
    png = _png(fig)
    plt.close(fig)
    return png


def _html_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def render_html(summary: dict[str, Any], records: Sequence[dict[str, Any]]) -> str:
    try:
        images = plots(summary, records)
        figures = "".join(
            f'<figure><img alt="{name}" src="data:image/png;base64,{data}"></figure>' for name, data in images.items()
        )
    except ImportError:
        figures = f"<p><em>{html.escape(NO_PLOTS)}</em></p>"
    warnings = (
        "".join(f"<li>{html.escape(str(w['task']))}: {html.escape(w['warning'])}</li>" for w in summary["warnings"])
        or "<li>none</li>"
    )
    ident = "".join(f"<li>{html.escape(line)}</li>" for line in _identity_lines(summary))
    style = (
        "body{font-family:sans-serif;max-width:70em;margin:2em auto;color:#222}"
        "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.25em .6em;"
        "font-size:90%;text-align:left}th{background:#eee}figure{display:inline-block;margin:.5em}"
    )
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>cuda-agent bench report</title>"
        f"<style>{style}</style></head><body><h1>cuda-agent bench report</h1><ul>{ident}</ul>"
        "<h2>Headline, beside the paper's published numbers</h2>"
        + _html_table(["metric", "this run", "paper"], headline_rows(summary))
        + "<h2>Per level</h2>"
        + _html_table(LEVEL_HEAD, level_rows(summary))
        + "<h2>Definitions</h2><ul>"
        + "".join(f"<li>{html.escape(line)}</li>" for line in definitions(summary))
        + "</ul>"
        + f"<h2>Plots</h2>{figures}<h2>Harness warnings to review</h2><ul>{warnings}</ul>"
        + "<h2>Tasks</h2>"
        + _html_table(TASK_HEAD, task_rows(records))
        + "</body></html>"
    )


def write_reports(out: Path, summary: dict[str, Any], records: Sequence[dict[str, Any]]) -> None:
    (out / "report.md").write_text(render_markdown(summary, records))
    (out / "report.html").write_text(render_html(summary, records))

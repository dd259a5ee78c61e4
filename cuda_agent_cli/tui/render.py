"""Rich renderables for the chat's pieces (tool call lines, harness cards, the speedup table,
diffs): plain functions of data, so the widgets stay thin and tests can check the text.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import RenderableType
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from cuda_agent_cli.chat.ledger import fmt_speedup

if TYPE_CHECKING:
    from cuda_agent_cli.harness_result import HarnessResult

THEME = "monokai"
MIN_WIDTH = 60  # below this size every screen shows `too_small` instead of its content
MIN_HEIGHT = 16


def is_too_small(width: int, height: int) -> bool:
    return width < MIN_WIDTH or height < MIN_HEIGHT


def too_small(width: int, height: int, name: str) -> Text:
    """What a screen shows in place of its content while the terminal is too small."""
    return Text(
        f"The terminal is {width}x{height}; {name} needs at least {MIN_WIDTH}x{MIN_HEIGHT}.\n"
        "Make the window larger (the session keeps running).",
        style="bold yellow",
    )


def short_argument(name: str, args: dict[str, Any]) -> str:
    for key in ("file_path", "notebook_path", "command", "pattern", "bash_id", "shell_id"):
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            first = value.strip().splitlines()[0]
            return first if len(first) <= 60 else first[:57] + "..."
    return ""


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def tool_header(name: str, args: dict[str, Any], status: str, duration: float | None, expanded: bool) -> Text:
    """`▸ Read  model.py  ✓ 12 ms`: the one line a tool call collapses to."""
    marks = {
        "running": ("…", "yellow"),
        "ok": ("✓", "green"),
        "error": ("✗", "red"),
        "pending": ("·", "dim"),
        "interrupted": ("■", "red"),
    }
    mark, style = marks.get(status, ("?", "dim"))
    line = Text()
    line.append("▾ " if expanded else "▸ ", style="dim")
    line.append(name, style="bold")
    arg = short_argument(name, args)
    if arg:
        line.append(f"  {arg}")
    line.append(f"  {mark}", style=style)
    if status == "running":
        line.append(" running", style=style)
    elif duration is not None:
        line.append(f" {fmt_duration(duration)}", style="dim")
    return line


def lexer_for(name: str, args: dict[str, Any], output: str) -> str:
    """Which pygments lexer highlights a tool's output."""
    if output.lstrip().startswith("diff --git") or name in ("Edit", "MultiEdit") and output.startswith("---"):
        return "diff"
    path = args.get("file_path") or args.get("notebook_path")
    if name == "Read" and isinstance(path, str):
        return lexer_for_path(path)
    if name in ("Bash", "BashOutput"):
        return "console"
    return "text"


def lexer_for_path(path: str) -> str:
    from pygments.lexers import get_lexer_for_filename
    from pygments.util import ClassNotFound

    try:
        lexer = get_lexer_for_filename(Path(path).name)
    except ClassNotFound:
        return "text"
    return lexer.aliases[0] if lexer.aliases else "text"


def tool_output(name: str, args: dict[str, Any], output: str) -> RenderableType:
    lexer = lexer_for(name, args, output)
    if lexer == "text":
        return Text(output)
    return Syntax(output, lexer, theme=THEME, word_wrap=True, background_color="default")


def harness_card(tool: str, result: HarnessResult, best: bool = False, number: int | None = None) -> Panel:
    """compiled, correct, reward, speedups with spread, failed checks, warnings."""
    compiled, correct = result.compiled, result.correct
    grid = Table.grid(padding=(0, 2))
    # Every cell is a Text: details come from compiler and candidate output, never markup.

    def add(key: str | Text, value: Any) -> None:
        grid.add_row(
            key if isinstance(key, Text) else Text(key), value if isinstance(value, Text) else Text(str(value))
        )

    grid.add_column(style="dim")
    grid.add_column(overflow="fold")  # a long method or check detail folds, never ends in "…"
    add("compiled", Text("yes", "green") if compiled else Text("no", "red"))
    if compiled and tool != "Compile":
        add("correct", Text("yes", "green") if correct else Text("no", "red"))
    reward = result.reward
    if reward is not None:
        add("reward", Text(str(reward), "bold green" if reward >= 2 else ("red" if reward < 0 else "")))
    t = result.timings
    if t:
        add("kernel", f"{t.candidate_us:.1f} µs (eager {t.eager_us:.1f} µs, torch.compile {t.compile_us:.1f} µs)")
        add("vs eager", fmt_speedup(t, "eager"))
        add("vs torch.compile", fmt_speedup(t, "compile"))
        if t.uncertain:
            add("", Text("uncertain: the interval straddles a reward threshold", "yellow"))
        add("method", f"{t.method or '?'}, {t.trials} trials")
    failed = result.failed_checks()
    for c in failed[:6]:
        detail = c.detail.splitlines()
        add(Text("failed", "red"), f"{c.name}: {detail[0][:160] if detail else ''}")
    if len(failed) > 6:
        add("", f"... and {len(failed) - 6} more failed checks")
    for e in result.errors[:3]:
        first = str(e).strip().splitlines()
        add(Text("error", "red"), first[0][:200] if first else "")
    for w in result.warnings:
        add(Text("warning", "yellow"), str(w)[:200])
    ok = correct or (tool == "Compile" and compiled)
    title = f"{'★ ' if best else ''}{tool}" + (f" · candidate {number}" if number else "")
    if best:
        title += " · best so far"
    return Panel(grid, title=title, title_align="left", border_style="green" if ok else "red", expand=False)


def speedup_table(best: HarnessResult | None, device: str) -> Table:
    """The review's table: eager, torch.compile, kernel, spread, method, GPU, warnings."""
    t = best.timings if best else None
    where = (best.environment.get("gpu") if best else None) or ("CPU" if device == "cpu" else device)
    table = Table(title=f"Measured on {where}", title_justify="left", expand=False)
    table.add_column("")
    table.add_column("time", justify="right")
    table.add_column("kernel speedup", justify="right")
    table.add_column("spread", justify="right")
    if not t:
        table.add_row("kernel", "not timed", "-", "-")
    else:

        def spread(iv: tuple[float, float] | None) -> str:
            return f"{iv[0]:.2f}-{iv[1]:.2f}x" if iv is not None else "-"

        table.add_row(
            "eager PyTorch", f"{t.eager_us:.1f} µs", f"{t.speedup_vs_eager:.2f}x", spread(t.speedup_vs_eager_interval)
        )
        table.add_row(
            "torch.compile",
            f"{t.compile_us:.1f} µs",
            f"{t.speedup_vs_compile:.2f}x",
            spread(t.speedup_vs_compile_interval),
        )
        for side, label in (("autotune", "max-autotune"), ("graphs", "CUDA graphs")):
            row = t.baselines.get(side)
            if isinstance(row, dict) and "us" in row:
                iv = row.get("interval")
                table.add_row(label, f"{row['us']:.1f} µs", f"{row['speedup']:.2f}x", spread(tuple(iv) if iv else None))
        table.add_row(Text("kernel", style="bold"), Text(f"{t.candidate_us:.1f} µs", style="bold"), "", "")
    return table


def review_more(outcome: Any) -> Text:
    """Beside the table: the time per call as Python makes it, what trying the kernel in the
    user's setting found, and a row per shape with the weighted aggregate."""
    best = outcome.result
    out = Text()
    deployment = getattr(outcome, "deployment", None)
    if deployment is not None:
        line = deployment.summary(best.timings.speedup_vs_eager if best and best.timings else None)
        if line:
            out.append(line + "\n", style="bold")
        for problem in deployment.problems():
            out.append(f"warning: {problem}\n", style="yellow")
    shapes = getattr(outcome, "shapes", None)
    if shapes is not None:
        out.append("every shape (the kernel runs where it says kernel):\n", style="bold")
        for call, count, eager, kernel, ratio, runs in shapes.rows():
            out.append(f"  {call} · {count} calls · eager {eager} · kernel {kernel} · {ratio} · {runs}\n")
        out.append(shapes.summary() + "\n", style="bold")
    return out


def review_facts(best: HarnessResult | None, device: str) -> Text:
    t = best.timings if best else None
    env = best.environment if best else {}
    out = Text()
    against = t.against_best() if t else ""
    if against:
        out.append(against + "\n")
    out.append(f"method: {t.method if t else 'not timed'}\n")
    if best is not None and best.precision:
        out.append(f"outputs verified at: {best.precision}\n")
    out.append(
        f"GPU: {env.get('gpu') or 'none (' + device + ')'} · torch {env.get('torch', '?')}"
        + (f" · CUDA {env['cuda']}" if env.get("cuda") else "")
        + "\n"
    )
    from cuda_agent_cli.harness.reward import reward_in_words

    reward = best.reward if best else None
    meaning = f": {reward_in_words(reward)}" if reward is not None else ""
    out.append(f"reward: {reward}{meaning}" + (" (uncertain)" if t and t.uncertain else "") + "\n")
    warnings = best.warnings if best else []
    if warnings:
        for w in warnings:
            out.append(f"warning: {w}\n", style="yellow")
    else:
        out.append("warnings: none\n", style="dim")
    return out


def unified_diff_text(path: str, old: str | None, new: str) -> str:
    a = (old or "").splitlines(keepends=True)
    b = new.splitlines(keepends=True)
    lines = difflib.unified_diff(a, b, fromfile=f"a/{path}" if old is not None else "/dev/null", tofile=f"b/{path}")
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def diff_view(patch: str) -> Syntax:
    # Wrapped, never cropped: a long line of the patch is shown whole.
    return Syntax(patch or "(no changes)", "diff", theme=THEME, word_wrap=True, background_color="default")


def side_by_side(path: str, old: str | None, new: str) -> Table:
    """Old and new next to each other, changed lines marked, both highlighted for the file's language."""
    lexer = lexer_for_path(path)
    a = (old or "").splitlines()
    b = new.splitlines()
    table = Table(show_header=True, expand=True, box=None, padding=(0, 1))
    table.add_column(f"before: {path}" if old is not None else "(new file)", ratio=1, overflow="fold")
    table.add_column(f"after: {path}", ratio=1, overflow="fold")
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)

    def cell(line: str | None, style: str) -> RenderableType:
        if line is None:
            return Text("")
        text = Syntax(line, lexer, theme=THEME, background_color="default").highlight(line)
        text.rstrip()
        if style:
            text.stylize(style)
        return text

    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            for k in range(i2 - i1):
                table.add_row(cell(a[i1 + k], ""), cell(b[j1 + k], ""))
            continue
        left = a[i1:i2]
        right = b[j1:j2]
        for k in range(max(len(left), len(right))):
            table.add_row(
                cell(left[k] if k < len(left) else None, "on #3c1f1f"),
                cell(right[k] if k < len(right) else None, "on #1f3c1f"),
            )
    return table


def approval_body(request: Any, side: bool) -> RenderableType:
    """What an approval shows: the command, or the proposed edit as a diff."""
    if request.command is not None:
        return Syntax(request.command, "bash", theme=THEME, word_wrap=True, background_color="default")
    if request.new is not None and request.path:
        if side:
            return side_by_side(request.path, request.old, request.new)
        return diff_view(unified_diff_text(request.path, request.old, request.new))
    if request.problem:
        return Text(f"The edit cannot be applied as asked: {request.problem}", "yellow")
    return Text(request.summary)


def status_text(
    *,
    model: str,
    device: str,
    mode: str,
    context_pct: float,
    tokens: int,
    cost: float,
    best: str,
    busy: str | None,
    queued: int,
    banner: str | None = None,
    keys: str | None = None,
) -> Text:
    """model · device · mode · context % (amber at 70, red at 90) · tokens · cost · best, and the
    keys for what has the focus."""
    out = Text(no_wrap=True, overflow="ellipsis")
    if banner:
        out.append(f"{banner}  ", style="bold red")
    if model.startswith("replay:"):
        model = "replay:" + Path(model[len("replay:") :]).name  # the folder says nothing and takes the bar
    out.append(model, style="bold")
    out.append(f" · {device}")
    out.append(" · ")
    out.append(mode, style="bold magenta" if mode == "yolo" else ("yellow" if mode == "accept-edits" else "cyan"))
    style = "bold red" if context_pct >= 90 else ("bold yellow" if context_pct >= 70 else "green")
    out.append(" · ctx ")
    out.append(f"{context_pct:.0f}%", style=style)
    out.append(f" · {tokens:,} tok · ${cost:.4f}")
    out.append(" · best ")
    out.append(best, style="bold green" if best != "-" else "dim")
    if busy:
        out.append(f" · {busy}", style="yellow")
    if queued:
        out.append(f" · {queued} queued", style="yellow")
    if keys:
        out.append(f" · {keys}", style="dim")
    return out

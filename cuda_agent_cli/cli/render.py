"""Rich rendering for the CLI: live progress of a session, the speedup table, the diff, y/n.

Progress consumes the agent loop's events (agent.events); nothing here decides anything.
"""

from __future__ import annotations

import io
import sys
import time
from typing import TYPE_CHECKING, Any, Literal, TextIO, cast

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from cuda_agent_cli.harness_result import HarnessResult

HARNESS_TOOLS = ("Compile", "Verify", "Profile")


def _short_args(name: str, args: dict[str, Any]) -> str:
    for key in ("file_path", "notebook_path", "pattern", "command"):
        if key in args and isinstance(args[key], str):
            text = args[key].strip().splitlines()[0] if args[key].strip() else ""
            return text if len(text) <= 70 else text[:67] + "..."
    return ""


def harness_line(tool: str, result: HarnessResult) -> str:
    """One line for a Compile/Verify/Profile result."""
    if not result.compiled:
        first = (result.errors or ["compile failed"])[0].splitlines()[0]
        return f"{tool}: compile failed — {first[:120]}"
    if tool == "Compile":
        return f"{tool}: compiled"
    if not result.correct:
        failed = result.failed_checks()
        why = failed[0].detail or failed[0].name if failed else (result.errors or ["incorrect"])[0]
        return f"{tool}: not correct — {why.splitlines()[0][:120] if why else ''}"
    t = result.timings
    if tool == "Verify" or not t:
        return f"{tool}: correct"
    return (
        f"{tool}: {t.candidate_us:.1f} µs — {t.speedup_vs_eager:.2f}x vs eager, "
        f"{t.speedup_vs_compile:.2f}x vs torch.compile (reward {result.reward})"
    )


def stop_line(reason: str, detail: str = "") -> str:
    """ "stopped: max_turns 3 from pyproject.toml"; other reasons keep their detail after a dash."""
    if detail.startswith(reason + " "):
        return f"stopped: {detail}"
    return f"stopped: {reason}" + (f" — {detail}" if detail else "")


class ProgressState:
    """What the status line shows, updated from events (kept separate so it is easy to test)."""

    def __init__(self) -> None:
        self.turn = 0
        self.cost = 0.0
        self.running: str | None = None
        self.best: str | None = None
        self.started = time.monotonic()
        self._args: dict[str, dict[str, Any]] = {}

    def status(self) -> str:
        parts = [f"turn {self.turn}", f"${self.cost:.3f}", f"{time.monotonic() - self.started:.0f}s"]
        if self.best:
            parts.append(f"best {self.best}")
        if self.running:
            parts.append(f"running {self.running}…")
        return " · ".join(parts)

    def apply(self, event: Any) -> str | None:
        """Update from one event; returns a line to print permanently, if any."""
        kind = getattr(event, "kind", "")
        if kind == "assistant_message":
            self.turn = event.turn
            self.cost += event.cost_usd or 0.0
            text = (event.content or "").strip()
            if text:
                first = text.splitlines()[0]
                return f"[{event.turn}] {first[:110]}"
        elif kind == "tool_started":
            self.running = event.name
            self._args[event.call_id] = event.arguments or {}
        elif kind == "tool_finished":
            self.running = None
            args = self._args.pop(event.call_id, {})
            if event.name in HARNESS_TOOLS:
                return None  # the harness_result event says it better
            mark = "✗" if event.is_error else "✓"
            return f"    {mark} {event.name} {_short_args(event.name, args)}".rstrip()
        elif kind == "harness_result":
            result = event.result
            line = harness_line(event.tool, result)
            t = result.timings
            if event.best and t:
                self.best = f"{t.speedup_vs_compile:.2f}x vs torch.compile"
            elif event.best and not self.best:
                self.best = "correct"
            return f"    {'★' if event.best else '•'} {line}"
        elif kind == "cost":
            self.cost = event.total_cost_usd
        elif kind == "retrying":
            return f"    model call failed ({event.reason}); retry {event.attempt} in {event.wait_s:.0f}s"
        elif kind == "stopped":
            self.running = None
            return stop_line(event.reason, event.detail)
        return None


class LiveProgress:
    """The event sink for an interactive terminal: permanent lines plus one live status line."""

    def __init__(self, console: Console, banner: str | None = None) -> None:
        self.console = console
        self.banner = banner
        self.state = ProgressState()
        self.live = Live(self._render(), console=console, refresh_per_second=4, transient=True)

    def _render(self) -> Any:
        status = Text(self.state.status(), style="dim")
        if self.banner:
            return Group(Text(self.banner, style="bold red"), status)
        return status

    def __enter__(self) -> "LiveProgress":
        if self.banner:
            self.console.print(Text(self.banner, style="bold red"))
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.__exit__(*exc)  # type: ignore[arg-type]

    def __call__(self, event: Any) -> None:
        line = self.state.apply(event)
        if line:
            style = "bold" if line.lstrip().startswith("★") else ""
            self.console.print(Text(line, style=style))
        self.live.update(self._render())

    def stage(self, message: str) -> None:
        self.console.print(Text(message, style="dim"))


class PlainProgress:
    """Batch mode: plain lines on stderr, no live display (or nothing at all when quiet)."""

    def __init__(self, stream: TextIO | None = None, quiet: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.state = ProgressState()

    def __call__(self, event: Any) -> None:
        line = self.state.apply(event)
        if line and not self.quiet:
            print(line, file=self.stream, flush=True)

    def stage(self, message: str) -> None:
        if not self.quiet:
            print(message, file=self.stream, flush=True)


# ---------------------------------------------------------------- the review


def speedup_table(best: HarnessResult | None, device: str) -> Table:
    """eager, torch.compile and the kernel: time, speedup; method and GPU in the caption."""
    t = best.timings if best else None
    where = (best.environment.get("gpu") if best else None) or ("CPU" if device == "cpu" else device)
    table = Table(title=f"Measured on {where}", title_justify="left")
    table.add_column("")
    table.add_column("time", justify="right")
    table.add_column("kernel speedup", justify="right")
    if not t:
        table.add_row("kernel", "not timed", "—")
        return table
    table.add_row("eager PyTorch", f"{t.eager_us:.1f} µs", f"{t.speedup_vs_eager:.2f}x")
    table.add_row("torch.compile", f"{t.compile_us:.1f} µs", f"{t.speedup_vs_compile:.2f}x")
    for side, label in (("autotune", "max-autotune"), ("graphs", "CUDA graphs")):
        row = t.baselines.get(side)
        if isinstance(row, dict) and "us" in row:
            table.add_row(label, f"{row['us']:.1f} µs", f"{row['speedup']:.2f}x")
    table.add_row(Text("kernel", style="bold"), Text(f"{t.candidate_us:.1f} µs", style="bold"), "")
    return table


def baseline_line(best: HarnessResult | None) -> str:
    """Against the best baseline timed, and how close to the hardware's speed of light."""
    return best.timings.against_best() if best and best.timings else ""


def shapes_table(shapes: Any) -> Table:
    """A row per call the kernel was judged at."""
    table = Table(title="Every shape (the kernel runs where it says kernel)", title_justify="left")
    for name, justify in (
        ("call", "left"),
        ("calls", "right"),
        ("eager", "right"),
        ("kernel", "right"),
        ("vs eager", "right"),
        ("runs", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in shapes.rows():
        table.add_row(*row)
    return table


def method_line(best: HarnessResult | None) -> str:
    if best is None or best.timings is None:
        return ""
    t, env = best.timings, best.environment
    held = f"; outputs verified at {best.precision}" if best.precision else ""
    return (
        f"method: {t.method or '?'}; {t.trials} trials; torch {env.get('torch', '?')}"
        + (f", CUDA {env['cuda']}" if env.get("cuda") else "")
        + held
    )


def reward_line(best: HarnessResult | None) -> str:
    """The reward in words, e.g. "reward 3: faster than both eager and torch.compile by more than 5%"."""
    if best is None or best.reward is None:
        return "no reward: correct, not timed" if best and best.correct else "no reward"
    from cuda_agent_cli.harness.reward import reward_in_words

    line = f"reward {best.reward}: {reward_in_words(best.reward)}"
    if best.timings and best.timings.uncertain:
        line += " (uncertain: the measured spread straddles a 5% threshold, another run may differ)"
    return line


def summary_line(outcome: Any) -> str:
    """The result in one line, repeated just above the question so it is in sight when answering."""
    best = outcome.result
    t = best.timings if best else None
    parts = [outcome.target]
    if t:
        parts.append(
            f"{t.speedup_vs_eager:.2f}x vs eager, {t.speedup_vs_compile:.2f}x vs torch.compile "
            f"(reward {outcome.reward})"
        )
    elif best:
        parts.append("correct, not timed (no reward)")
    plan = outcome.plan
    if plan is not None:
        from cuda_agent_cli.writeback.diff import diff_stats

        files, added, removed = diff_stats(plan.changes)
        parts.append(f"{files} files, +{added} -{removed} lines")
    return " · ".join(parts)


_DIFF_STYLES = (("diff --git", "bold"), ("+++", "bold"), ("---", "bold"), ("@@", "cyan"), ("+", "green"), ("-", "red"))


def diff_text(patch: str) -> Text:
    """The patch with git's colours; every line whole (printed with soft_wrap, never cropped)."""
    text = Text()
    for line in patch.splitlines(keepends=True):
        style = next((s for prefix, s in _DIFF_STYLES if line.startswith(prefix)), None)
        text.append(line, style=style)
    return text


def render_diff(console: Console, patch: str, paged: bool) -> None:
    """On a terminal the diff goes through $PAGER; elsewhere (or without a pager) every line is
    printed whole, however long: a cut line would misreport what is about to be written."""
    if paged:
        from cuda_agent_cli.cli import pager

        shown = patch
        if console.color_system is not None:  # NO_COLOR and dumb terminals get it plain
            buffer = io.StringIO()
            # Console.color_system names one of the systems the constructor takes.
            system = cast(Literal["auto", "standard", "256", "truecolor", "windows"], console.color_system)
            Console(file=buffer, force_terminal=True, color_system=system, width=console.width).print(
                diff_text(patch), soft_wrap=True, end=""
            )
            shown = buffer.getvalue()
        if pager.page(shown):
            return
    if console.is_terminal:
        console.print(diff_text(patch), soft_wrap=True, end="")
    else:
        # Byte for byte: no width, no tab expansion, nothing a renderer could cut.
        console.file.write(patch)
        console.file.flush()


def render_review(console: Console, outcome: Any, paged: bool = False) -> None:
    """The speedup table, what the reward means and the harness's warnings, then the full diff."""
    best = outcome.result
    console.print()
    console.print(speedup_table(best, outcome.device))
    console.print(Text(reward_line(best), style="bold"), soft_wrap=True)
    against = baseline_line(best)
    if against:
        console.print(Text(against), soft_wrap=True)
    deployment = getattr(outcome, "deployment", None)
    per_call = (
        deployment.summary(best.timings.speedup_vs_eager if best and best.timings else None) if deployment else ""
    )
    if per_call:
        console.print(Text(per_call, style="bold"), soft_wrap=True)
    for problem in deployment.problems() if deployment is not None else []:
        console.print(Text(f"warning: {problem}", style="yellow"), soft_wrap=True)
    shapes = getattr(outcome, "shapes", None)
    if shapes is not None:
        console.print(shapes_table(shapes))
        console.print(Text(shapes.summary(), style="bold"), soft_wrap=True)
    method = method_line(best)
    if method:
        console.print(Text(method, style="dim"), soft_wrap=True)
    for warning in best.warnings if best else []:
        console.print(Text(f"warning: {warning}", style="yellow"), soft_wrap=True)
    plan = outcome.plan
    if plan is None:
        return
    from cuda_agent_cli.writeback.diff import diff_stats

    files, added, removed = diff_stats(plan.changes)
    console.print(
        Text(
            f"{files} files, +{added} -{removed} lines in {plan.repo_root}"
            + (" (opening the pager; q returns here)" if paged else ":")
        ),
        soft_wrap=True,
    )
    render_diff(console, plan.patch, paged)


def confirm(console: Console, question: str) -> bool:
    """y applies, anything else (including end of input) does not."""
    try:
        answer = console.input(f"[bold]{escape(question)}[/bold] \\[y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def summary_lines(outcome: Any, applied: Any = None, patch_path: str | None = None) -> list[str]:
    lines = [
        f"session {outcome.session_id} · {outcome.turns} turns · ${outcome.cost_usd:.3f} · "
        f"transcript {outcome.transcript}"
    ]
    if applied is not None:
        if applied.commit:
            lines.append(
                f"committed {applied.commit[:10]} on new branch {applied.branch} (you are on it now; "
                f"`git checkout {applied.previous_branch or '-'}` goes back)"
            )
        else:
            lines.append(f"wrote {len(applied.written)} files (not committed)")
        lines.extend(applied.notes)
    if patch_path:
        lines.append(f"patch saved to {patch_path} (git apply {patch_path})")
    return lines

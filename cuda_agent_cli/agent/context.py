"""Keeping the conversation inside the model's context budget.

Two tools: every tool output is capped (docs/architecture.md, "Contracts": 30,000 characters, cut from the middle, since
compiler errors and logs matter most at their start and end), and when the conversation nears the
budget the older turns are replaced by one summary that keeps the task, the rules and the best
result so far. The summary is built deterministically from the session state, so compaction
works offline and with replayed models.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Sequence

from cuda_agent_cli.harness_result import HarnessResult
from cuda_agent_cli.model.port import approx_tokens

if TYPE_CHECKING:
    from cuda_agent_cli.agent.session_store import CandidateRecord

MAX_TOOL_OUTPUT_CHARS = 30_000
DEFAULT_CONTEXT_TOKENS = 131_072
COMPACT_AT = 0.8  # fraction of the budget that triggers compaction
KEEP_TURNS = 6  # assistant turns kept verbatim after a compaction
SUMMARY_HEADER = "[Summary of the earlier part of this session; older turns were compacted to save context]"

POLICY_RULES = {
    "strict": "strict — ModelNew.forward may not run torch compute ops; C++ may use cuBLAS only for GEMM and "
    "cuDNN only for convolution; the work must happen in your own kernels.",
    "hybrid": "hybrid — torch ops are allowed in ModelNew.forward, but a custom kernel from cuda_extension must "
    "really run in the timed call.",
}
WRITE_TOOLS = ("Write", "Edit", "MultiEdit", "NotebookEdit")


def truncate_output(text: str, limit: int = MAX_TOOL_OUTPUT_CHARS) -> str:
    """`text` if it fits, else its head and tail with a note of how much was cut between."""
    if len(text) <= limit:
        return text
    note = "\n\n[... {n} characters cut from the middle of this output ...]\n\n"
    room = limit - len(note.format(n=len(text)))
    head = room * 2 // 3
    tail = room - head
    cut = len(text) - head - tail
    return text[:head] + note.format(n=cut) + text[len(text) - tail :]


def context_budget(configured: int | None, model_window: int | None) -> int:
    """The configured budget, never more than the model's own window."""
    budget = configured or DEFAULT_CONTEXT_TOKENS
    if model_window:
        budget = min(budget, model_window)
    return budget


def compaction_span(messages: Sequence[dict[str, Any]], keep_turns: int = KEEP_TURNS) -> tuple[int, int] | None:
    """[start, end) of the messages to summarize, or None when there is nothing to gain.

    The head (system prompt and the task message) and the last `keep_turns` assistant turns stay.
    The span ends right before an assistant message, so a tool call is never separated from its
    result."""
    start = 1 if messages and messages[0].get("role") == "system" else 0
    if start < len(messages) and messages[start].get("role") == "user":
        start += 1  # the task message; later user messages are part of the history
    assistants = [i for i in range(start, len(messages)) if messages[i].get("role") == "assistant"]
    if len(assistants) <= keep_turns:
        return None
    end = assistants[-keep_turns] if keep_turns > 0 else len(messages)
    if end - start < 2:
        return None
    return start, end


def _fmt_speedups(result: HarnessResult) -> str:
    t = result.timings
    if t is None:
        return ""
    return f"{t.speedup_vs_eager:.2f}x vs eager, {t.speedup_vs_compile:.2f}x vs torch.compile, {t.candidate_us:.1f} us"


def _result_line(tool: str, turn: int, result: HarnessResult) -> str:
    status = "compiled" if result.compiled else "did not compile"
    if result.compiled:
        status += ", correct" if result.correct else ", NOT correct"
    line = f"turn {turn} {tool}: {status}, reward {result.reward}"
    speed = _fmt_speedups(result)
    if speed:
        line += f" ({speed})"
    failed = [c.name for c in result.failed_checks()]
    if failed:
        line += f"; failed checks: {', '.join(failed)}"
    if result.errors:
        line += f"; first error: {str(result.errors[0])[:200]}"
    return line


def build_summary(
    removed: Sequence[dict[str, Any]],
    policy: str | None,
    best: CandidateRecord | None,
    harness_results: Sequence[dict[str, Any]],
) -> str:
    """The text that replaces `removed`. `best` is the session's best candidate or None;
    `harness_results` are {"turn", "tool", "result": HarnessResult} in order."""
    lines = [SUMMARY_HEADER, "The task is in the first user message above and still applies."]
    if policy:
        lines.append("Rules (policy): " + POLICY_RULES.get(policy, policy))
    if best is not None:
        speed = _fmt_speedups(best.result)
        lines.append(
            f"Best result so far: turn {best.turn} {best.tool}, reward {best.result.reward}"
            + (f" ({speed})" if speed else "")
            + ". Its files are saved; beat it, do not regress it."
        )
    else:
        lines.append("Best result so far: none yet (no candidate has passed Verify).")
    if harness_results:
        lines.append("Latest harness results:")
        lines.extend("- " + _result_line(r["tool"], r["turn"], r["result"]) for r in harness_results[-5:])
    written: dict[str, None] = {}
    counts: dict[str, int] = {}
    last_text = ""
    for m in removed:
        if m.get("role") == "assistant":
            if m.get("content"):
                last_text = str(m["content"])
            for c in m.get("tool_calls") or ():
                name = c["function"]["name"]
                counts[name] = counts.get(name, 0) + 1
                if name in WRITE_TOOLS:
                    try:
                        args = json.loads(c["function"]["arguments"] or "{}")
                    except ValueError:
                        args = {}
                    path = args.get("file_path") or args.get("notebook_path")
                    if path:
                        written[str(path)] = None
        elif m.get("role") == "user" and m.get("content", "").startswith(SUMMARY_HEADER):
            # An earlier summary: keep its history lines, they are still true.
            lines.extend(ln for ln in m["content"].splitlines() if ln.startswith("Earlier:"))
    if counts:
        lines.append("Earlier: tool calls " + ", ".join(f"{n} x{k}" for n, k in sorted(counts.items())) + ".")
    if written:
        lines.append(
            "Earlier: files written or edited: " + ", ".join(written) + ". Read them again for their current content."
        )
    if last_text:
        snippet = " ".join(last_text.split())
        lines.append("Your last note before this summary: " + (snippet[:600] + ("…" if len(snippet) > 600 else "")))
    lines.append("Continue from here.")
    return "\n".join(lines)


def estimate_tokens(messages: Sequence[dict[str, Any]], reported: int = 0) -> int:
    """The larger of the model's last reported count and a character estimate."""
    return max(reported, approx_tokens(messages))

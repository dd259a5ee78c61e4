"""A stored conversation as the chat showed it, rebuilt from a transcript's events (and, for a
chat, what its chat.json keeps beside them): items in order, each made into a widget by the
view only when it is shown. Pure: no textual, nothing drawn here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from cuda_agent_cli.agent import events as ev
from cuda_agent_cli.chat.ledger import Judged, Ledger

NOTICE_KINDS = ("info", "success", "warning", "error")


@dataclass(slots=True, eq=False)
class HistoryItem:
    """One piece of a resumed conversation: a user turn, a reply, a tool call, a harness card,
    or a line from cuda-agent itself (its kind is the notice's: info, success, warning, error;
    any other kind shows as a warning)."""

    kind: str  # user | assistant | tool | card | a notice's kind
    text: str
    call_id: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    status: str = "pending"
    output: str = ""
    duration: float | None = None
    expanded: bool = False
    judged: Judged | None = None  # a card: the ledger's result
    best: bool = False  # a card: whether it was the best when it was judged

    @classmethod
    def shell(cls, e: ev.ShellCommand, n: int) -> list[HistoryItem]:
        """A `!cmd` the user ran, as the chat showed it: their line, and the command's output."""
        line = cls("tool", "Bash", f"shell-{n}", {"command": e.command})
        line.status, line.output, line.duration = ("error" if e.is_error else "ok"), e.output, e.duration_s
        line.expanded = True
        return [cls("user", "!" + e.command), line]

    @classmethod
    def card(cls, judged: Judged, best: bool) -> HistoryItem:
        return cls("card", judged.tool, judged=judged, best=best)


@dataclass
class History:
    """The items of a transcript, and what its events said about the session on the way."""

    items: list[HistoryItem] = field(default_factory=list)
    tokens: int = 0  # prompt and completion tokens of its turns
    context_tokens: int | None = None  # the last cost update's context size
    context_budget: int = 0  # the last cost update's budget that was not 0
    cost_usd: float | None = None  # the last cost update's total


@dataclass
class Opening:
    """What a conversation opens with: a resumed session's items (None: nothing to resume) and
    the line that says what was opened (`title` in bold, then `line`)."""

    items: list[HistoryItem] | None
    title: str
    line: str


def turn_items(e: ev.Event, items: list[HistoryItem], calls: dict[str, HistoryItem]) -> None:
    """A stored agent event as the conversation showed it: a reply and its tool calls, a tool's
    result on its line, a stop that was not `done`."""
    if isinstance(e, ev.AssistantMessage):
        if e.content and e.content.strip():
            items.append(HistoryItem("assistant", e.content))
        for c in e.tool_calls:
            item = HistoryItem("tool", c["name"], c["id"], c.get("arguments") or {})
            if c.get("error"):
                item.status, item.output = "error", f"Error: {c['error']}"
            calls[c["id"]] = item
            items.append(item)
    elif isinstance(e, ev.ToolFinished) and e.call_id in calls:
        item = calls[e.call_id]
        item.status, item.output, item.duration = ("error" if e.is_error else "ok"), e.output, e.duration_s
    elif isinstance(e, ev.Stopped) and e.reason not in ("done",):
        items.append(HistoryItem("notice", f"stopped: {e.reason}" + (f" — {e.detail}" if e.detail else "")))


def read_history(
    path: Path,
    placed: Iterable[tuple[float, HistoryItem]] = (),
    ledger: Ledger | None = None,
    session_id: str = "",
) -> History:
    """The conversation a stored transcript holds. `placed`: items the transcript does not hold,
    each put before the event of its index (sorted). `ledger`: the transcript's harness results
    are added to it as `session_id`'s and shown as cards where they happened (an optimize
    session's transcript; a chat's cards come from its chat file, in `placed`)."""
    from cuda_agent_cli.agent.transcript import read_events

    found = History()
    items = found.items
    waiting = list(placed)
    calls: dict[str, HistoryItem] = {}
    for n, e in enumerate(read_events(path)):
        while waiting and waiting[0][0] <= n:
            items.append(waiting.pop(0)[1])
        if isinstance(e, ev.UserMessage):
            items.append(HistoryItem("user", e.content))
        elif isinstance(e, ev.AssistantMessage):
            found.tokens += e.prompt_tokens + e.completion_tokens
            turn_items(e, items, calls)
        elif isinstance(e, ev.CostUpdate):
            found.context_tokens = e.context_tokens
            found.context_budget = e.context_budget or found.context_budget
            found.cost_usd = e.total_cost_usd
        elif isinstance(e, ev.ShellCommand):
            items.extend(HistoryItem.shell(e, n))
        elif isinstance(e, ev.HarnessResultEvent) and ledger is not None:
            judged = ledger.add(session_id, e.tool, e.turn, e.result, sources=e.sources)
            items.append(HistoryItem.card(judged, ledger.was_best(judged)))
        else:
            turn_items(e, items, calls)
    items.extend(item for _, item in waiting)  # recorded after the last event, or before "at" was kept
    return found


def placed_history(
    ledger: Ledger,
    optimize_started: dict[str, dict[str, Any]],
    notes: list[dict[str, Any]],
    transcript_of: Callable[[str], Path],
) -> list[tuple[float, HistoryItem]]:
    """What a chat's transcript does not hold, at the place it happened (from its chat file):
    each /optimize session (its line, its start, the agent's turns and cards from its own
    transcript, `transcript_of(session_id)`), the other harness cards (/verify, /profile), and
    the lines the chat recorded (what the review applied, what /undo reverted), sorted by where
    they go."""
    out: list[tuple[tuple[float, float, int, float], list[HistoryItem]]] = []
    end = float("inf")
    cards: dict[str, list[Judged]] = {}
    for c in ledger.judged:
        cards.setdefault(c.session_id, []).append(c)
    consumed: set[int] = set()

    def where(entry: dict[str, Any]) -> tuple[float, float, int, float]:
        at, after, seq = entry.get("at"), entry.get("after"), entry.get("seq")
        # Before the cards judged after it was recorded (a card's place: index - 1, then 1).
        return (
            at if isinstance(at, int) else end,
            after if isinstance(after, int) else end,
            0,
            seq if isinstance(seq, int) else 0,
        )

    for sid, start in optimize_started.items():
        block = [HistoryItem("info", f"optimize session {sid} started for {start.get('target') or '?'}")]
        block += optimize_history(transcript_of(sid), ledger, cards.get(sid, []), consumed)
        out.append((where(start), block))
    for note in notes:
        out.append((where(note), [HistoryItem(str(note.get("kind") or "info"), note["text"])]))
    for c in ledger.judged:
        if c.index not in consumed:
            key = (c.at if c.at is not None else end, float(c.index - 1), 1, 0.0)
            out.append((key, [HistoryItem.card(c, ledger.was_best(c))]))
    out.sort(key=lambda pair: pair[0])
    return [(key[0], item) for key, block in out for item in block]


def optimize_history(path: Path, ledger: Ledger, cards: list[Judged], consumed: set[int]) -> list[HistoryItem]:
    """An /optimize session's conversation from its own transcript, as it was shown live: the
    agent's text and tool calls, each harness result as the ledger's card of it (their indexes
    go into `consumed`), a stop that was not `done`. Empty when its transcript is gone (the
    cards are then placed alone)."""
    from cuda_agent_cli.agent.transcript import read_events

    if not path.is_file():
        return []
    items: list[HistoryItem] = []
    calls: dict[str, HistoryItem] = {}
    left = list(cards)
    try:
        for e in read_events(path):
            if isinstance(e, ev.HarnessResultEvent):
                if left:
                    c = left.pop(0)
                    consumed.add(c.index)
                    items.append(HistoryItem.card(c, ledger.was_best(c)))
            elif not isinstance(e, ev.UserMessage):  # the task message was not shown live
                turn_items(e, items, calls)
    except (OSError, ValueError):
        return items
    return items

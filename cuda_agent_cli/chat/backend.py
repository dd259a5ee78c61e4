"""The seam between the chat's screen (tui/) and what it shows: `ChatBackend`, which the chat
session (`chat.session.ChatSession`) and one optimize session on a terminal
(`chat.optimize_task.TaskRuntime`) both implement. The view reads the status bar's facts and
the ledger from it, asks it what the conversation opens with, and hands it what the agent's
events say about sessions (which started, each harness result, costs); it draws what comes
back.

The other way, a backend's work (a chat turn, an optimize session) tells the view what happens
through one `ViewSink` the view passes in: the agent's events, lines to show (`Note`), and the
approvals its permission gate waits on (`chat.approval.PendingApproval`, answered through the
future it holds). The backend never holds a reference to the view.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol, TypeAlias

if TYPE_CHECKING:
    from cuda_agent_cli.agent.events import CostUpdate, Event, HarnessResultEvent, Resumed, SessionStarted
    from cuda_agent_cli.chat.approval import PendingApproval
    from cuda_agent_cli.chat.history import Opening
    from cuda_agent_cli.chat.ledger import Judged, Ledger


@dataclass(frozen=True)
class Note:
    """A line for the conversation: its text and its kind (info, success, warning, error)."""

    text: str
    kind: str = "info"


# What a backend's work tells the view while it runs, called from the work's thread.
ViewSink: TypeAlias = Callable[["Event | Note | PendingApproval"], None]


class ChatBackend(Protocol):
    """What the chat's screen needs of the session it shows."""

    @property
    def session_id(self) -> str:
        """The session whose conversation this is ("" while an optimize session has not started)."""

    @property
    def root(self) -> Path:
        """The repository (mentions, the opening line)."""

    @property
    def model_string(self) -> str: ...

    @property
    def device(self) -> str | None:
        """The device, when known before the screen detects one."""

    @property
    def mode(self) -> str:
        """The status bar's permission mode."""

    @property
    def ledger(self) -> Ledger: ...

    @property
    def context_tokens(self) -> int: ...

    @property
    def context_budget(self) -> int: ...

    @property
    def tokens(self) -> int:
        """Prompt and completion tokens of every session shown so far."""

    @property
    def cost_usd(self) -> float:
        """The status bar's cost: this session's and every session it started."""

    def opening(self) -> Opening:
        """What the conversation opens with: a resumed session's history, and the line saying so."""

    def session_started(self, event: SessionStarted) -> bool:
        """A session started: True when it is another than this one (the view says so)."""

    def resumed(self, event: Resumed) -> str | None:
        """A session was resumed: the session the events that follow belong to."""

    def record_result(self, session_id: str, event: HarnessResultEvent) -> Judged:
        """A harness result of `session_id` (the agent's, or one /verify or /profile made) into
        the ledger: what the view's card shows."""

    def record_cost(self, session_id: str, event: CostUpdate) -> None:
        """What a model call of `session_id` cost, and the context it left."""

    def record_note(self, text: str, kind: str = "info") -> None:
        """A line shown that no transcript holds, kept where this backend keeps them."""

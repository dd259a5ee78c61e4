"""The one writer of a session's events.

Every event of a session goes through a `SessionRecorder`: applied to the session's state, then
appended to its transcript, then handed to the sink (a UI), in that order, so the transcript is
safe before anyone reacts and replaying it rebuilds the state. The agent loop writes each of its
events through one; the chat writes the events it makes outside the loop (its start, a `!cmd`, a
/compact) through one too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cuda_agent_cli.agent.transcript import TranscriptWriter

if TYPE_CHECKING:
    from cuda_agent_cli.agent.events import Event, EventSink
    from cuda_agent_cli.agent.session_store import SessionState


class SessionRecorder:
    """Records events of `state`; callable as an event sink. Close it (or use it as a context
    manager) when the run is over."""

    def __init__(self, state: SessionState, sink: EventSink | None = None, fsync: bool = True) -> None:
        self.state = state
        self.sink = sink
        self.writer = TranscriptWriter(state.transcript_path, fsync=fsync)

    def __call__(self, event: Event) -> None:
        self.state.apply(event)
        self.writer(event)
        if self.sink is not None:
            self.sink(event)

    def close(self) -> None:
        self.writer.close()

    def __enter__(self) -> SessionRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def record(state: SessionState, event: Event, sink: EventSink | None = None) -> None:
    """One event of `state` recorded on its own (an event made outside a run of the loop)."""
    with SessionRecorder(state, sink) as recorder:
        recorder(event)

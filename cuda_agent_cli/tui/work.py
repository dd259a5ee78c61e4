"""The app's worker: one job at a time (a chat turn, /optimize, optimize's session, a model
check) in a thread of its own, and what the backend tells the view while the job runs, handed
to the app thread as textual messages.

The job is given `tell` as its backend's `chat.backend.ViewSink`. Streamed text goes into the
conversation's buffer, which its timer draws (never waited on); anything else (an agent event, a
`Note`, a `PendingApproval`) is posted as `Work.Told`, and the job's thread waits until the app
has handled it, so text streamed after an event never reaches the screen before the event does.
When the job ends, `Work.Done` carries its result, or the line that says why it has none:
nothing a job raises ends the app.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from textual.message import Message

from cuda_agent_cli.agent.events import TextDelta
from cuda_agent_cli.chat.backend import Note
from cuda_agent_cli.errors import CudaAgentError, Interrupted

if TYPE_CHECKING:
    from textual.app import App

    from cuda_agent_cli.agent.events import Event
    from cuda_agent_cli.chat.approval import PendingApproval

WAIT_S = 0.05  # how often a job waiting on the app looks whether the app is still there


@dataclass(frozen=True)
class Job:
    label: str  # what the status bar says while it runs
    run: Callable[[], Any]  # in the worker thread
    after: Callable[[Any], None] | None = None  # in the app thread, with what `run` returned (not None)


class Work:
    """Runs the app's jobs, one at a time; `busy` is the running one's label."""

    class Told(Message):
        """Something the running job's backend tells the view; the job waits for `handled`."""

        def __init__(self, item: Event | Note | PendingApproval) -> None:
            super().__init__()
            self.item = item
            self.handled = threading.Event()

    class Done(Message):
        """The job ended: `result` (None when it raised) and the line saying why, if it did."""

        def __init__(self, job: Job, result: Any, failure: Note | None) -> None:
            super().__init__()
            self.job = job
            self.result = result
            self.failure = failure

    def __init__(self, app: App[Any], buffer_text: Callable[[str], None]) -> None:
        self.app = app
        self.buffer_text = buffer_text
        self.cancel = threading.Event()
        self.busy: str | None = None
        self.thread: threading.Thread | None = None

    def start(self, job: Job) -> None:
        """Run `job` in the worker thread (the app thread marks it done on `Work.Done`)."""
        self.busy = job.label
        self.cancel.clear()
        self.thread = threading.Thread(target=self._run, args=(job,), name="cuda-agent-worker", daemon=True)
        self.thread.start()

    def _run(self, job: Job) -> None:
        result = None
        failure = None
        try:
            result = job.run()
        except Interrupted:
            failure = Note("interrupted — everything done so far is kept", "warning")
        except CudaAgentError as exc:
            failure = Note(exc.one_line(), "error")
        except Exception as exc:  # a bug must not end the app
            failure = Note(f"internal error: {type(exc).__name__}: {exc}", "error")
        self.app.post_message(self.Done(job, result, failure))

    def tell(self, item: Event | Note | PendingApproval) -> None:
        """The backend's `ViewSink`, called in the job's thread."""
        if isinstance(item, TextDelta):
            self.buffer_text(item.text)  # never waited on: the conversation's timer puts it on screen
            return
        told = self.Told(item)
        if not self.app.post_message(told):
            return  # the app is closing
        while not told.handled.wait(WAIT_S):
            if not self.app.is_running:
                return

    def done(self) -> None:
        """The app thread has shown what the job left: nothing runs now."""
        self.busy = None

    def finish(self, timeout: float) -> None:
        """After the app closed: stop a running job and wait for it to write its last events."""
        self.cancel.set()
        if self.thread is not None and self.thread.is_alive():
            self.thread.join(timeout)

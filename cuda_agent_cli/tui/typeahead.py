"""Keys typed ahead, taken one at a time.

textual hands each key to the focused widget at once, so keys typed ahead would reach the
prompt before the screen their earlier keys open, and an Escape meant for that screen would go
to the prompt and be lost. `TypeAhead` (held by the app, which gives it each event first) delivers
each key (and paste) from the terminal only once the one before has been handled in full;
Ctrl+C and Ctrl+Q never wait.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, Awaitable, Callable

from textual import events
from textual.app import App

KEY_SETTLE_S = 1.0  # the longest a typed-ahead key waits on one part of the app that handles the one before
IMMEDIATE_KEYS = frozenset({"ctrl+c", "ctrl+q"})  # never wait behind typed-ahead keys


class TypeAhead:
    def __init__(self, app: App[Any], route: Callable[[events.Event], Awaitable[None]]) -> None:
        self.app = app
        self.route = route  # textual's own routing of an event: priority bindings, else the focus
        self._typed: deque[events.Event] = deque()
        self._pump: asyncio.Task[None] | None = None

    async def take(self, event: events.Event) -> bool:
        """Whether `event` is a key (or paste) from the terminal, now queued here: delivered at
        once when none is waiting before it, else after the ones before it."""
        typed = isinstance(event, events.Key) and event.key not in IMMEDIATE_KEYS
        if not (typed or isinstance(event, events.Paste)) or event.is_forwarded:
            return False
        self._typed.append(event)
        if self._pump is None or self._pump.done():
            self._pump = asyncio.create_task(self._deliver())
            await asyncio.sleep(0)  # it delivers this key now; only the ones after it wait
        return True

    async def _deliver(self) -> None:
        app = self.app
        while self._typed and app.is_running:
            key = self._typed.popleft()
            target: Any = app.focused or app.screen
            screen = app.screen
            try:
                await self.route(key)
                await self._drain(target.ancestors_with_self)
                if app.screen is not screen:  # opened or closed one: let it mount and take the focus
                    await self._drain([app.screen, app])
            except Exception as exc:  # what textual does with an error in its own handling of a key
                self._typed.clear()
                app._handle_exception(exc)
                return

    async def _drain(self, chain: list[Any]) -> None:
        """Until what `chain` (a widget and its ancestors, the app last) had queued has been
        handled, and what that queued in turn (a key bubbling up, a message it posted): each
        node's queue is drained in the order a bubbling message passes through them."""
        for _ in range(8):
            quiet = True
            for node in chain:
                if node is not self.app and node.message_queue_size:
                    quiet = False
                done = asyncio.Event()
                if not node.call_later(done.set):
                    continue
                try:
                    await asyncio.wait_for(done.wait(), KEY_SETTLE_S)
                except asyncio.TimeoutError:
                    return
            if quiet:
                return

"""Keys typed ahead, taken one at a time: the app under the chat's screens.

textual hands each key to the focused widget at once, so keys typed ahead would reach the
prompt before the screen their earlier keys open, and an Escape meant for that screen would go
to the prompt and be lost. Here each key (and paste) from the terminal is delivered only once
the one before has been handled in full; Ctrl+C and Ctrl+Q never wait.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from textual import events
from textual.app import App

KEY_SETTLE_S = 1.0  # the longest a typed-ahead key waits on one part of the app that handles the one before


class TypeAheadApp(App[int]):
    IMMEDIATE_KEYS = frozenset({"ctrl+c", "ctrl+q"})  # never wait behind typed-ahead keys

    def __init__(self) -> None:
        super().__init__()
        self._typed: deque[events.Event] = deque()  # keys (and pastes) typed ahead, taken one at a time
        self._key_pump: asyncio.Task[None] | None = None

    async def on_event(self, event: events.Event) -> None:
        """Keys (and pastes) from the terminal are taken one at a time, each once the one before
        has been handled in full (a command it submitted run, a screen it opened or closed). A
        key with none before it goes at once."""
        typed = isinstance(event, events.Key) and event.key not in self.IMMEDIATE_KEYS
        if (typed or isinstance(event, events.Paste)) and not event.is_forwarded:
            if self._key_pump is not None and not self._key_pump.done():
                self._typed.append(event)
                return
            self._typed.append(event)
            self._key_pump = asyncio.create_task(self._deliver_typed())
            await asyncio.sleep(0)  # it delivers this key now; only the ones after it wait
            return
        await super().on_event(event)

    async def _deliver_typed(self) -> None:
        while self._typed and self.is_running:
            key = self._typed.popleft()
            target: Any = self.focused or self.screen
            screen = self.screen
            try:
                await super().on_event(key)  # textual's own routing: priority bindings, else the focus
                await self._drain(target.ancestors_with_self)
                if self.screen is not screen:  # opened or closed one: let it mount and take the focus
                    await self._drain([self.screen, self])
            except Exception as exc:  # what textual does with an error in its own handling of a key
                self._typed.clear()
                self._handle_exception(exc)
                return

    async def _drain(self, chain: list[Any]) -> None:
        """Until what `chain` (a widget and its ancestors, the app last) had queued has been
        handled, and what that queued in turn (a key bubbling up, a message it posted): each
        node's queue is drained in the order a bubbling message passes through them."""
        for _ in range(8):
            quiet = True
            for node in chain:
                if node is not self and node.message_queue_size:
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

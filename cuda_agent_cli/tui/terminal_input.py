"""Keys typed ahead in a real terminal: Escape followed at once by more typing.

A terminal sends the Escape key as the byte ESC, and Alt+x as ESC then x; escape sequences (the
arrows, F-keys, mouse reports) start with ESC too. textual's input parser, after an ESC, keeps
collecting what follows as one sequence until it recognizes one, 32 characters have come, or
0.1 s pass. Escape followed at once by text (typed ahead, pasted, sent by tmux's send-keys) is
therefore lost: `Esc` + `/undo` reaches the app as `/undo` with no Escape (the Alt of Alt+/ is
dropped), `Esc` + `b...` as Ctrl+Left (iTerm's Alt+B), and a longer line as `^` and the text.

`EscapeSplitter` rewrites the input before the parser reads it: an ESC followed by a printable
character that cannot start an escape sequence, with more input behind it in the same read (or
one that came alone in its read, with the text in the next), is sent as the Escape key (the kitty
keyboard protocol's `CSI 27 u`, which textual reads as Escape) and the text as itself. An ESC
with a single character after it and nothing more in its read is left alone: that is what Alt+x
is, pressed by a person. Bracketed pastes are passed through untouched. `ChatDriver` is textual's
Linux driver with its input thread reading through the splitter.
"""

from __future__ import annotations

from typing import Any

ESC = "\x1b"
ESCAPE_KEY = "\x1b[27u"  # the Escape key in the kitty keyboard protocol; textual reads it as "escape"
# What may follow ESC in an escape sequence: CSI, SS3, OSC, DCS, APC, PM, SOS, ST, and ESC again.
SEQUENCE_STARTS = frozenset("[O]P_^X\\\x1b")
PASTE_START = "\x1b[200~"
PASTE_END = "\x1b[201~"


class EscapeSplitter:
    """Terminal input in, the same input out with "Escape, then typing" made unambiguous."""

    def __init__(self) -> None:
        self.held = False  # a read ended with a lone ESC: decided by the next read, or by `flush`
        self._paste = False

    def feed(self, data: str) -> str:
        after_lone_esc = self.held
        if self.held:
            data = ESC + data
            self.held = False
        out: list[str] = []
        i, n = 0, len(data)
        while i < n:
            if self._paste:
                end = data.find(PASTE_END, i)
                if end < 0:
                    out.append(data[i:])
                    break
                out.append(data[i : end + len(PASTE_END)])
                i = end + len(PASTE_END)
                self._paste = False
                continue
            c = data[i]
            if c != ESC:
                out.append(c)
                i += 1
                continue
            if data.startswith(PASTE_START, i):
                out.append(PASTE_START)
                i += len(PASTE_START)
                self._paste = True
                continue
            if i + 1 >= n:
                self.held = True  # the next read (or the escape delay) says what it was
                break
            nxt = data[i + 1]
            typed = nxt not in SEQUENCE_STARTS and nxt.isprintable()
            if typed and (i + 2 < n or (after_lone_esc and i == 0)):
                out.append(ESCAPE_KEY)
            else:
                out.append(ESC)
            i += 1
        return "".join(out)

    def flush(self) -> str:
        """Nothing came after a lone ESC within the escape delay: it was the Escape key."""
        if not self.held:
            return ""
        self.held = False
        return ESCAPE_KEY


def chat_driver(base: type[Any]) -> type[Any]:
    """`base` (the driver textual picked) with its input read through `EscapeSplitter`, where
    it is textual's Linux driver; else `base` as it is."""
    try:
        from textual.drivers.linux_driver import LinuxDriver
    except ImportError:  # pragma: no cover - not on this platform
        return base
    if not (isinstance(base, type) and issubclass(base, LinuxDriver)):
        return base
    try:
        from textual._loop import loop_last
        from textual._parser import ParseError
        from textual._xterm_parser import XTermParser
    except ImportError:  # pragma: no cover - a textual without these: its own input thread
        return base

    class ChatDriver(base):  # type: ignore[misc, valid-type]
        def run_input_thread(self) -> None:
            """textual's input thread (LinuxDriver.run_input_thread), its reads going through
            the splitter, and a lone ESC sent as Escape once the escape delay passes."""
            import os
            import selectors
            from codecs import getincrementaldecoder

            from textual import constants

            selector = selectors.SelectSelector()
            selector.register(self.fileno, selectors.EVENT_READ)
            fileno = self.fileno
            parser = XTermParser(self._debug)
            splitter = EscapeSplitter()
            decode = getincrementaldecoder("utf-8")().decode
            delay = min(0.1, constants.ESCAPE_DELAY)

            def process(ready: list[Any], final: bool = False) -> None:
                for last, (_key, mask) in loop_last(ready):
                    if mask & selectors.EVENT_READ:
                        data = decode(os.read(fileno, 1024 * 4), final=final and last)
                        if not data:
                            break
                        data = splitter.feed(data)
                        if data:  # empty when the read was a lone ESC; the parser takes "" for the end
                            for event in parser.feed(data):
                                self.process_message(event)
                if not ready and splitter.held:
                    for event in parser.feed(splitter.flush()):
                        self.process_message(event)
                for event in parser.tick():
                    self.process_message(event)

            try:
                while not self.exit_event.is_set():
                    process(selector.select(delay))
                selector.unregister(self.fileno)
                process(selector.select(delay), final=True)
            finally:
                selector.close()
                try:
                    for _event in parser.feed(""):
                        pass
                except (EOFError, ParseError):
                    pass

    ChatDriver.__name__ = ChatDriver.__qualname__ = f"Chat{base.__name__}"
    return ChatDriver

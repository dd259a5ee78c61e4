"""Escape followed at once by typing, as a terminal sends it: the splitter in front of textual's
input parser (tui/terminal_input.py), read back as the keys the app gets."""

from __future__ import annotations

import sys
import time

import pytest
from textual._xterm_parser import XTermParser

from cuda_agent_cli.tui.terminal_input import EscapeSplitter, chat_driver


def keys(reads: list[str], split: bool = True) -> list[str]:
    """The key names textual's parser makes of these reads (each one read of the terminal)."""
    parser = XTermParser()
    splitter = EscapeSplitter()
    out = []
    for data in reads:
        data = splitter.feed(data) if split else data
        if data:
            out += list(parser.feed(data))
    if split and splitter.held:  # nothing more came within the escape delay
        out += list(parser.feed(splitter.flush()))
    time.sleep(0.15)
    out += list(parser.tick())
    return [getattr(e, "key", type(e).__name__) for e in out]


def typed(text: str) -> list[str]:
    names = {"/": "slash", " ": "space", ".": "full_stop", ":": "colon", "\r": "enter"}
    return [names.get(c, c) for c in text]


def test_escape_then_a_typed_command_reaches_the_app_as_escape_and_the_command():
    line = "\x1b/optimize mixers/blend.py::Blend\r"
    # textual alone: the Escape turns into "^" (or vanishes for a shorter line)
    assert keys(["/help\r" + line], split=False)[6] == "circumflex_accent"
    assert keys(["\x1b/undo\r"], split=False) == typed("/undo\r")
    assert keys(["/help\r" + line]) == typed("/help\r") + ["escape"] + typed(line[1:])
    assert keys(["\x1b/undo\r"]) == ["escape"] + typed("/undo\r")
    # the Escape alone in one read and the text in the next (two send-keys, a slow link)
    assert keys(["\x1b", "/undo\r"]) == ["escape"] + typed("/undo\r")
    assert keys(["\x1b", "x"]) == ["escape", "x"]
    # Escape then text that starts with a letter iTerm's Alt+B would have eaten
    assert keys(["\x1bblend\r"]) == ["escape"] + typed("blend\r")


def test_what_is_not_typed_ahead_is_left_as_textual_reads_it():
    assert keys(["\x1b"]) == ["escape"]
    assert keys(["\x1b\x1b"]) == ["escape", "escape"]
    assert keys(["\x1bb"]) == keys(["\x1bb"], split=False) == ["ctrl+left"]  # Alt+B, one key pressed
    assert keys(["\x1bx"]) == ["alt+x"]
    assert keys(["\x1b[A"]) == keys(["\x1b", "[A"]) == ["up"]  # an arrow, whole or split between reads
    assert keys(["\x1b[1;5C"]) == ["ctrl+right"]
    assert keys(["\x1b\r"]) == keys(["\x1b\r"], split=False)
    paste = "\x1b[200~a\x1bbc d\x1b[201~x"
    assert keys([paste]) == keys([paste], split=False)  # a bracketed paste is passed through untouched


def test_the_splitter_only_rewrites_escape_before_typing():
    s = EscapeSplitter()
    assert s.feed("abc") == "abc" and not s.held
    assert s.feed("x\x1b") == "x" and s.held
    assert s.feed("[B") == "\x1b[B" and not s.held
    assert s.feed("\x1b") == "" and s.flush() == "\x1b[27u" and s.flush() == ""
    assert s.feed("\x1b:q\r") == "\x1b[27u:q\r"


@pytest.mark.skipif(sys.platform == "win32", reason="textual's Linux driver")
def test_the_chat_runs_on_textuals_linux_driver_reading_through_the_splitter():
    from textual.drivers.linux_driver import LinuxDriver

    from cuda_agent_cli.tui.app import ChatApp

    driver = chat_driver(LinuxDriver)
    assert issubclass(driver, LinuxDriver) and driver.run_input_thread is not LinuxDriver.run_input_thread
    assert chat_driver(object) is object  # another driver (TEXTUAL_DRIVER, headless) is kept as it is
    picked = ChatApp.get_driver_class(object.__new__(ChatApp))  # what ChatApp() runs on a terminal
    assert issubclass(picked, LinuxDriver) and picked.__name__ == "ChatLinuxDriver"

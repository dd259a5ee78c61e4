"""The prompt's completion popup: slash commands while a command name is typed, repository files
after `@`. The prompt (tui/prompt.py) mounts it above itself after the first frame."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from rich.text import Text
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from cuda_agent_cli.chat import commands, mentions


class PromptArea(Protocol):
    """What the popup needs of the prompt it completes (tui/prompt.py's PromptArea, which mounts
    it): its text, where its end is, and to be told whether a completion is showing."""

    completing: bool

    @property
    def text(self) -> str: ...

    @property
    def document(self) -> Any: ...

    def load_text(self, text: str) -> None: ...

    def move_cursor(self, location: Any) -> None: ...


class Completions(OptionList):
    def __init__(self) -> None:
        super().__init__(id="completions")
        self.display = False
        self.files: list[str] | None = None  # the repository's files, listed at the first `@`

    def show_for(self, text: str, prompt: PromptArea, root: Path) -> None:
        """The completions of what the prompt holds, or none (hidden)."""
        options: list[Option] = []
        if text.startswith("/") and " " not in text and "\n" not in text:
            for c in commands.completions(text):
                options.append(
                    Option(
                        Text.assemble((f"/{c.name} ", "bold"), (c.usage + "  ", "cyan"), (c.description, "dim")),
                        id=f"/{c.name} ",
                    )
                )
        else:
            partial = mentions.trailing_mention(text)
            if partial is not None:
                if self.files is None:
                    self.files = mentions.repo_files(root)
                for f in mentions.complete(partial, self.files):
                    options.append(Option(f"@{f}", id=f"@{f}"))
        self.clear_options()
        if options:
            self.add_options(options)
            self.highlighted = 0
        self.display = bool(options)
        prompt.completing = bool(options)

    def hide(self, prompt: PromptArea) -> None:
        self.display = False
        prompt.completing = False

    def accept(self, prompt: PromptArea) -> None:
        """The highlighted completion into the prompt."""
        if self.highlighted is None:
            return
        choice = self.get_option_at_index(self.highlighted).id or ""
        text = prompt.text
        if choice.startswith("/"):
            new = choice
        else:
            partial = mentions.trailing_mention(text) or ""
            new = text[: len(text) - len(partial) - 1] + choice + " "
        prompt.load_text(new)
        prompt.move_cursor(prompt.document.end)
        self.hide(prompt)

    def move(self, step: int) -> None:
        if self.option_count:
            self.highlighted = ((self.highlighted or 0) + step) % self.option_count

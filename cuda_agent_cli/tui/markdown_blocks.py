"""Assistant Markdown drawn a top-level block at a time, each block rendered once per width.

rich's Markdown renders a document as its top-level blocks (paragraphs, headings, lists, code
fences, tables, quotes, rules) one after another, with a blank line between them (none after a
rule). So a reply can be rendered block by block, with the same lines as rendering it whole (a
paragraph holding an image, which rich glues to the block before, gets its blank line here).
While a reply streams, every block but the last is finished (text is only ever appended, and
Markdown's blocks close top to bottom): those are rendered once and kept, and only the last
block, the one still growing, is rendered again for the next frame. A code fence that is still
open is drawn a line at a time, each line highlighted on its own and kept, so a long kernel
costs a frame its newest line, not all of it; once the fence closes, the block is highlighted
whole, as a settled reply shows it. textual asks a widget for its height and then for its
lines; both are answered from the same rendering.
"""

from __future__ import annotations

import copy
import re
from functools import lru_cache
from itertools import islice
from typing import TYPE_CHECKING, Any, NamedTuple

from rich.segment import Segment
from textual.css.styles import RulesMap
from textual.strip import Strip
from textual.style import Style
from textual.visual import RenderOptions, Visual

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from rich.console import RenderableType
    from textual.widget import Widget

CODE_THEME = "monokai"


class Block(NamedTuple):
    source: str
    blank_after: bool  # rich puts a blank line after every top-level block but a horizontal rule


class OpenFence(NamedTuple):
    lexer: str
    code: str  # the lines so far, without the opening fence


class Split(NamedTuple):
    settled: list[Block]  # the blocks that text appended later cannot change: all but the last
    rest_at: int  # where the rest (the last block, still growing) begins in the normalized text
    rest_has_block: bool
    references: bool  # link reference definitions (`[x]: url`) change how earlier blocks render
    open_fence: OpenFence | None = None  # the rest is a code fence not closed yet


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt

    return MarkdownIt().enable("strikethrough").enable("table")  # what rich's Markdown parses with


@lru_cache(maxsize=1)
def _template() -> Any:
    from rich.markdown import Markdown

    return Markdown("", code_theme=CODE_THEME)


def markdown(source: str) -> Any:
    """rich's Markdown of `source`, parsed by the one shared parser: rich builds a parser for
    every document, which costs more than rendering a paragraph."""
    md = copy.copy(_template())
    md.markup = source
    md.parsed = _parser().parse(source)
    return md


def split_blocks(text: str) -> Split:
    """`text` (normalized as markdown-it does) cut into its finished top-level blocks and the rest."""
    env: dict[str, object] = {}
    tokens = _parser().parse(text, env)
    starts = [t for t in tokens if t.level == 0 and t.nesting in (0, 1) and t.map is not None]
    if env.get("references") or not starts:
        return Split([], 0, bool(starts), bool(env.get("references")))
    lines = text.split("\n")
    settled = []
    for tok in starts[:-1]:
        begin, end = tok.map or (0, 0)
        settled.append(Block("\n".join(lines[begin:end]), tok.type != "hr"))
    last = starts[-1]
    begin, end = last.map or (0, 0)
    fence = None
    if last.type == "fence" and not _closes(last.markup, lines[begin + 1 : end]):
        fence = OpenFence(last.info.partition(" ")[0] or "text", last.content)
    return Split(settled, sum(len(line) + 1 for line in lines[:begin]), True, False, fence)


def _closes(markup: str, body: list[str]) -> bool:
    """Whether the lines after an opening fence end with its closing fence (CommonMark: the same
    character, at least as many, indented less than 4, nothing after but spaces)."""
    if not body or not markup:
        return False
    return re.fullmatch(rf" {{0,3}}{re.escape(markup[0])}{{{len(markup)},}}[ \t]*", body[-1]) is not None


def _gap(before: Block | None, lines: list[Strip]) -> list[Strip]:
    """A block's lines with the blank line rich puts before it. A block with elements inside (a
    list, a quote, a table) brings that line itself; a paragraph, heading or code block gets it
    from the block before."""
    if before is not None and before.blank_after and not (lines and not lines[0].cell_length):
        return [Strip([]), *lines]
    return lines


def _normalize(text: str) -> str:
    # markdown-it's own normalisation, done first so that line numbers and offsets agree with it.
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\0", "\ufffd")


class MarkdownBlocks(Visual):
    """A Visual of a Markdown document that grows by `append`; rendered block by block."""

    def __init__(self, widget: Widget, source: str = "") -> None:
        self._widget = widget
        self.source = ""
        self._settled: list[Block] = []
        self._rest = ""  # the text after the settled blocks: the last block, still growing
        self._rest_has_block = False
        self._fence: OpenFence | None = None
        self._whole = False  # link references: render the whole document, never split
        self._key: tuple[int, Style] | None = None  # the width and style the caches below hold
        self._settled_lines: list[Strip] = []
        self._settled_done = 0  # how many settled blocks are in _settled_lines
        self._tail: tuple[str, list[Strip]] | None = None  # the last block's source and lines
        self._code: dict[tuple[str, str], list[Strip]] = {}  # an open fence's lines, each by itself
        if source:
            self.append(source)

    def append(self, text: str) -> None:
        self.source += text
        rest = self._rest + _normalize(text)
        split = Split([], 0, True, True) if self._whole else split_blocks(rest)
        if split.references and not self._whole:
            # From now on the whole document is rendered at once, the settled blocks with it.
            self._whole, self._key, self._settled = True, None, []
            rest = _normalize(self.source)
        self._settled.extend(split.settled)
        self._rest = rest[split.rest_at :]
        self._rest_has_block = split.rest_has_block
        self._fence = split.open_fence

    # -- rendering --------------------------------------------------------------------------------
    def _render(self, renderable: RenderableType, width: int, style: Style) -> list[Strip]:
        app = self._widget.app
        options = app.console_options.update(highlight=False, width=width, height=None)
        segments = app.console.render(self._widget.post_render(renderable, style.rich_style), options)
        return [
            Strip(line) for line in Segment.split_and_crop_lines(segments, width, include_new_lines=False, pad=False)
        ]

    def lines(self, width: int, style: Style) -> list[Strip]:
        """Every line of the document at `width`, rendering only what is not cached for it."""
        if self._key != (width, style):
            self._key = (width, style)
            self._settled_lines, self._settled_done, self._tail = [], 0, None
            self._code.clear()
        out = self._settled_lines
        for i in range(self._settled_done, len(self._settled)):
            block = self._settled[i]
            if self._tail is not None and self._tail[0] == block.source.rstrip():
                body = self._tail[1]  # rendered while it was the last block (a closed fence)
            else:
                body = self._render(markdown(block.source), width, style)
            out.extend(_gap(self._settled[i - 1] if i else None, body))
        self._settled_done = len(self._settled)
        key = self._rest.rstrip()
        if self._tail is None or self._tail[0] != key:
            if not self._rest_has_block:
                body = []
            elif self._fence is not None:
                body = self._fence_lines(self._fence, width, style)
            else:
                body = self._render(markdown(self._rest), width, style)
            self._tail = (key, body)
        if not self._rest_has_block:
            return out
        return out + _gap(self._settled[-1] if self._settled else None, self._tail[1])

    def _fence_lines(self, fence: OpenFence, width: int, style: Style) -> list[Strip]:
        """An open code fence as rich draws a code block (padded, on the theme's background),
        each line highlighted by itself: a construct over several lines (a block comment) shows
        its colours once the fence closes."""
        from rich.syntax import Syntax

        code: dict[tuple[str, str], list[Strip]] = {}

        def draw(key: tuple[str, str], lexer: str, padding: tuple[int, int, int, int]) -> list[Strip]:
            lines = self._code.get(key)
            if lines is None:
                syntax = Syntax(key[1], lexer, theme=CODE_THEME, word_wrap=True, padding=padding)
                lines = self._render(syntax, width, style)
            code[key] = lines
            return lines

        pad = draw(("", ""), "text", (1, 0, 1, 0))  # the padding line above and below the code
        out = [pad[0]]
        for line in fence.code.rstrip().split("\n"):
            out.extend(draw((fence.lexer, line), fence.lexer, (0, 1, 0, 1)))
        out.append(pad[-1])
        self._code = code  # what this frame drew: the last line's earlier states are let go
        return out

    def render_strips(self, width: int, height: int | None, style: Style, options: RenderOptions) -> list[Strip]:
        return list(islice(self.lines(width, style), None, height))

    def get_height(self, rules: RulesMap, width: int) -> int:
        return len(self.lines(width, self._widget.visual_style))

    def get_optimal_width(self, rules: RulesMap, container_width: int) -> int:
        return container_width


def warm_up() -> None:
    """Import and build what the first reply's rendering needs (rich's Markdown, the parser, the
    lexers of the code a reply shows most), so that its first frame does not pay for it. Meant
    for a thread started after the first frame."""
    from pygments.lexers import get_lexer_by_name

    _template()
    _parser()
    for name in ("python", "cuda", "cpp", "bash"):
        get_lexer_by_name(name)

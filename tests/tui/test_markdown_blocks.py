"""A reply drawn a Markdown block at a time (tui/markdown_blocks): cut into its finished blocks,
and on screen line for line what rich's Markdown draws for the whole reply, however it arrived."""

from __future__ import annotations

import os
import random

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from chat_helpers import run  # noqa: E402
from rich.markdown import Markdown  # noqa: E402
from textual.app import App, ComposeResult  # noqa: E402
from textual.containers import VerticalScroll  # noqa: E402
from textual.widgets import Static  # noqa: E402

from cuda_agent_cli.tui.markdown_blocks import split_blocks  # noqa: E402
from cuda_agent_cli.tui.widgets import SettledMarkdown  # noqa: E402

REPLY = """## Step 1: what the kernel does

The reference reads `x` twice: once for the *mean* and once for the **variance**, see
[the notes](https://example.org/notes) and ~~the old plan~~.

- load with `float4`
- reduce with warp shuffles
  - then across warps
- write one atomic per feature

1. first
2. second

   a loose paragraph in the item

> the quote
> over two lines

---

| kernel | speedup |
|---|---|
| fused | 2.4x |

```cuda
__global__ void step(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;

    if (i < n) y[i] = x[i] * 2.0f;  // a comment long enough to wrap at the width of this test's terminal
}
```

    an indented code block

<div>html</div>

Setext heading
==============

```python
def f(x):
    \"\"\"A docstring
    over two lines.\"\"\"
    return x
```

~~~
a tilde fence
~~~

The last paragraph
goes on lazily."""


class Page(App[None]):
    """The reply rendered whole by rich (as Static) next to the block widget."""

    def __init__(self, whole: str, streamed: str = "") -> None:
        super().__init__()
        self.whole, self.streamed = whole, streamed

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(Markdown(self.whole, code_theme="monokai"), id="rich")
            yield SettledMarkdown(self.streamed, classes="assistant")


def screen_lines(widget) -> list:
    return [widget.render_line(y) for y in range(widget.size.height)]


def test_blocks_that_later_text_cannot_change_are_settled_and_the_last_one_is_not():
    split = split_blocks("# Title\n\nA paragraph\nover two lines.\n\n- one\n- tw")
    assert [b.source for b in split.settled] == ["# Title", "A paragraph\nover two lines."]
    text = "# Title\n\nA paragraph\nover two lines.\n\n- one\n- tw"
    assert text[split.rest_at :] == "- one\n- tw"
    assert split.open_fence is None and not split.references
    rule = split_blocks("above\n\n---\n\nbelow")
    assert [b.blank_after for b in rule.settled] == [True, False]  # rich puts no blank line after a rule


def test_an_open_code_fence_is_told_from_a_closed_one():
    open_ = split_blocks("Intro.\n\n```cuda\nint i = 0;\n``")
    assert open_.open_fence is not None and open_.open_fence.lexer == "cuda"
    assert open_.open_fence.code == "int i = 0;\n``"
    assert split_blocks("Intro.\n\n```cuda\nint i = 0;\n```").open_fence is None
    assert split_blocks("```\nshorter fence does not close\n``\n").open_fence is not None
    assert split_blocks("~~~~\nx\n~~~~~").open_fence is None


def test_link_references_are_flagged_so_the_reply_is_drawn_whole():
    assert split_blocks("See [the notes][n].\n\n[n]: https://example.org\n").references


def test_a_settled_reply_draws_what_rich_draws_for_it_whole():
    app = Page(REPLY, REPLY)

    async def go():
        async with app.run_test(size=(90, 60)) as pilot:
            await pilot.pause()
            whole, blocks = app.query_one("#rich"), app.query_one(SettledMarkdown)
            assert screen_lines(blocks) == screen_lines(whole)
            await pilot.resize_terminal(61, 60)  # every block again, at the new width
            await pilot.pause()
            assert blocks.size.width == 59 and screen_lines(blocks) == screen_lines(whole)

    run(go())


def test_a_reply_streamed_in_any_pieces_ends_as_rich_draws_it_whole():
    for seed in (1, 2):
        app = Page(REPLY)
        rnd = random.Random(seed)

        async def go():
            async with app.run_test(size=(90, 60)) as pilot:
                widget = app.query_one(SettledMarkdown)
                i = 0
                while i < len(REPLY):
                    n = rnd.randint(1, 30)
                    widget.append(REPLY[i : i + n])
                    i += n
                    if rnd.random() < 0.4:
                        await pilot.pause()  # a frame in between: the growing block drawn as it is
                await pilot.pause()
                assert widget.source == REPLY
                assert screen_lines(widget) == screen_lines(app.query_one("#rich"))

        run(go())


def test_an_open_code_fence_shows_its_lines_and_the_closed_one_is_highlighted_whole():
    code = "__global__ void k(float* y) {\n    y[threadIdx.x] = 2.0f;\n}\n"
    app = Page("Intro.\n\n```cuda\n" + code + "```\n", "Intro.\n\n```cuda\n")

    async def go():
        async with app.run_test(size=(80, 30)) as pilot:
            widget = app.query_one(SettledMarkdown)
            for line in code.splitlines(keepends=True):
                widget.append(line)
                await pilot.pause()
                shown = "\n".join(s.text for s in screen_lines(widget))
                assert line.strip() in shown  # each line is on screen as it arrives
            # With nothing spanning lines to colour, the open fence already looks as it will closed.
            assert screen_lines(widget) == screen_lines(app.query_one("#rich"))
            widget.append("```\n")
            await pilot.pause()
            assert screen_lines(widget) == screen_lines(app.query_one("#rich"))

    run(go())

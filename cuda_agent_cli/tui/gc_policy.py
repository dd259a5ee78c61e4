"""The garbage collector's settings for the TUI, set once the first frame is on the terminal.

textual's strips cache themselves (a crop or pad that changes nothing returns the strip, and the
strip keeps it), so almost every line drawn is a reference cycle that only the cyclic collector
frees. A frame allocates a few thousand such objects. With Python's defaults (a young
generation of 700 objects, a middle one collected every 10 young collections) they outlive a
collection or two, are promoted, and a full collection then walks the whole heap about once a
second while a reply streams: 30-60 ms of CPU each on the 2-core dev box, the largest stalls of
the streaming benchmark (docs/benchmarks.md). So:

- the objects alive after the first frame (modules, classes, the app) are frozen: they live as
  long as the process, and no collection walks them again;
- the young generation holds a few frames' worth of objects, so most of a frame's strips die
  young (a collection of under 10 ms), and the middle one is collected every 3 young ones, so
  it stays small too; a full collection comes about once in a 5,000-token reply.
"""

from __future__ import annotations

import gc

YOUNG = 10_000  # allocations between young collections (Python's default: 700)
MIDDLE = 3  # young collections per middle one (Python's default: 10)

_tuned = False


def tune_after_first_frame() -> None:
    """Collect once, freeze what is left and set the generations; once per process (a second
    app in the same process, as in the tests, changes nothing)."""
    global _tuned
    if _tuned:
        return
    _tuned = True
    gc.collect()  # what is garbage now must not be frozen with the rest
    gc.freeze()
    gc.set_threshold(YOUNG, MIDDLE, gc.get_threshold()[2])

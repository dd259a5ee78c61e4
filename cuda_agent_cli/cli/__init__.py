"""The command line: the typer app (app.py), one module per command, and the rich rendering.

`cuda-agent` (the console script) and `python -m cuda_agent_cli` both run `main`.
"""

from cuda_agent_cli.cli.entry import main

__all__ = ["main"]

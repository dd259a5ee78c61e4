"""The kernel ledger's table (textual's DataTable): imported and mounted after the first frame."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import DataTable

from cuda_agent_cli.tui.ledger import LEDGER_COLUMNS, Ledger


class LedgerPanel(DataTable):
    """Every candidate of the chat; the best one starred."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(cursor_type="row", **kw)
        self.add_columns(*LEDGER_COLUMNS)

    def show(self, ledger: Ledger) -> None:
        self.clear()
        for row in ledger.rows():
            self.add_row(*(Text(cell) for cell in row))  # plain text: never read as markup

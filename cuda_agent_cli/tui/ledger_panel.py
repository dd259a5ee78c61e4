"""The kernel ledger's table (textual's DataTable): imported and mounted after the first frame."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import DataTable

from cuda_agent_cli.chat.ledger import LEDGER_COLUMNS, Ledger


class LedgerPanel(DataTable):
    """Every candidate of the chat; the best one starred."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(cursor_type="row", **kw)
        self.add_columns(*LEDGER_COLUMNS)

    def show(self, ledger: Ledger) -> None:
        # Each column as wide as its widest cell, set here rather than measured by the table when
        # it next goes idle: the table's own measure only ever grows and lands a frame or more
        # later, so what a frame showed depended on how busy the machine was.
        rows = [[Text(cell) for cell in row] for row in ledger.rows()]  # plain text: never read as markup
        widths = [max([len(label), *(row[i].cell_len for row in rows)]) for i, label in enumerate(LEDGER_COLUMNS)]
        self.clear(columns=True)
        for label, width in zip(LEDGER_COLUMNS, widths):
            self.add_column(label, width=width)
        for row in rows:
            self.add_row(*row)

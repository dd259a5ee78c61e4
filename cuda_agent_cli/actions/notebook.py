"""NotebookEdit: replace, insert or delete one cell of a Jupyter notebook (.ipynb, nbformat 4)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from cuda_agent_cli.actions.files import read_text
from cuda_agent_cli.actions.paths import check_write, display, write_file
from cuda_agent_cli.actions.toolbox import ActionContext, ToolResult, error


def _cell_ids(cells: list[dict[str, Any]]) -> list[str]:
    # nbformat 4.5 cells carry an "id"; older notebooks are addressed as cell-0, cell-1, ...
    return [str(c.get("id") or f"cell-{i}") for i, c in enumerate(cells)]


def _find(cells: list[dict[str, Any]], cell_id: str) -> int | None:
    ids = _cell_ids(cells)
    if cell_id in ids:
        return ids.index(cell_id)
    if cell_id.isdigit() and int(cell_id) < len(cells):
        return int(cell_id)
    if cell_id.startswith("cell-") and cell_id[5:].isdigit() and int(cell_id[5:]) < len(cells):
        return int(cell_id[5:])
    return None


def _source(text: str) -> list[str]:
    # nbformat stores source as a list of lines, each but the last keeping its newline.
    return text.splitlines(keepends=True)


def _new_cell(kind: str, source: str, with_id: bool) -> dict[str, Any]:
    cell: dict[str, Any] = {"cell_type": kind, "metadata": {}, "source": _source(source)}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    if with_id:
        cell["id"] = uuid.uuid4().hex[:8]
    return cell


class NotebookEdit:
    name = "NotebookEdit"
    writes = True
    runs_commands = False
    description = (
        "Edits one cell of a Jupyter notebook (.ipynb).\n\n"
        "- notebook_path: the notebook file.\n"
        "- cell_id: the id of the cell (or its 0-based index). For edit_mode=insert the new "
        "cell goes after this cell, or first when cell_id is omitted.\n"
        "- edit_mode: replace (default) sets the cell's source, insert adds a new cell "
        "(cell_type required), delete removes the cell.\n"
        "- cell_type: code or markdown. Replacing a code cell clears its stale outputs."
    )
    input_schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "notebook_path": {"type": "string", "description": "The path of the .ipynb file"},
            "cell_id": {"type": "string", "description": "The id (or 0-based index) of the cell"},
            "new_source": {"type": "string", "description": "The new source of the cell"},
            "cell_type": {"type": "string", "enum": ["code", "markdown"], "description": "The cell type"},
            "edit_mode": {
                "type": "string",
                "enum": ["replace", "insert", "delete"],
                "description": "replace (default), insert or delete",
            },
        },
        "required": ["notebook_path", "new_source"],
        "additionalProperties": False,
    }

    def run(self, args: dict[str, Any], ctx: ActionContext) -> ToolResult:
        path = args["notebook_path"]
        if not path.endswith(".ipynb"):
            return error(f"{path} is not a .ipynb notebook; use Edit for other files")
        target = check_write(path, ctx.policy)
        if not target.is_file():
            return error(f"{path}: notebook does not exist")
        try:
            nb = json.loads(read_text(target))
        except json.JSONDecodeError as exc:
            return error(f"{path} is not valid notebook JSON: {exc}")
        cells = nb.get("cells") if isinstance(nb, dict) else None
        if not isinstance(cells, list):
            return error(f"{path} has no cell list; is it an nbformat 4 notebook?")
        mode = args.get("edit_mode", "replace")
        cell_id = args.get("cell_id")
        with_ids = nb.get("nbformat", 4) > 4 or nb.get("nbformat_minor", 0) >= 5
        idx = _find(cells, cell_id) if cell_id is not None else None
        if cell_id is not None and idx is None:
            return error(f"no cell `{cell_id}` in {path}; cells: {', '.join(_cell_ids(cells)) or 'none'}")
        if mode == "insert":
            kind = args.get("cell_type")
            if kind is None:
                return error("cell_type (code or markdown) is required to insert a cell")
            at = 0 if idx is None else idx + 1
            cell = _new_cell(kind, args["new_source"], with_ids)
            cells.insert(at, cell)
            what = f"Inserted a {kind} cell at position {at}" + (f" with id {cell['id']}" if with_ids else "")
        elif idx is None:
            return error(f"cell_id is required for edit_mode={mode}")
        elif mode == "delete":
            cells.pop(idx)
            what = f"Deleted cell {cell_id}"
        else:
            cell = cells[idx]
            kind = args.get("cell_type", cell.get("cell_type", "code"))
            cell["source"] = _source(args["new_source"])
            if kind != cell.get("cell_type"):
                cell["cell_type"] = kind
                if kind == "markdown":
                    cell.pop("outputs", None)
                    cell.pop("execution_count", None)
            if kind == "code":
                cell["outputs"] = []
                cell["execution_count"] = None
            what = f"Replaced the source of cell {cell_id}"
        text = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
        write_file(target, text.encode("utf-8"), ctx.policy)
        return ToolResult(
            f"{what} in {display(target, ctx.root)} ({len(cells)} cells now)",
            data={"path": str(target), "cells": len(cells)},
        )

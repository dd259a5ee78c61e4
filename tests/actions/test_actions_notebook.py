"""NotebookEdit on real nbformat JSON: replace, insert, delete, by id or index."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent_cli.actions import ActionContext, Toolbox, make_toolbox
from cuda_agent_cli.sandbox import Sandbox, SandboxPolicy, SandboxStatus


def _nb(minor: int = 5) -> dict:
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Title\n", "intro"]},
        {
            "cell_type": "code",
            "execution_count": 3,
            "metadata": {},
            "source": ["x = 1\n", "print(x)"],
            "outputs": [{"output_type": "stream", "name": "stdout", "text": ["1\n"]}],
        },
    ]
    if minor >= 5:
        cells[0]["id"] = "intro-md"
        cells[1]["id"] = "code-1"
    return {
        "cells": cells,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
        "nbformat": 4,
        "nbformat_minor": minor,
    }


@pytest.fixture
def tb(tmp_path: Path) -> Toolbox:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "nb.ipynb").write_text(json.dumps(_nb()))
    (repo / "old.ipynb").write_text(json.dumps(_nb(2)))
    (repo / "broken.ipynb").write_text("{not json")
    pol = SandboxPolicy.repository(repo)
    sb = Sandbox(pol, SandboxStatus(False, "unit tests"), enabled=False)
    return make_toolbox(ActionContext(sb))


def load(tb: Toolbox, name: str = "nb.ipynb") -> dict:
    return json.loads((tb.ctx.root / name).read_text())


def test_replace_sets_source_as_lines_and_clears_stale_outputs(tb: Toolbox) -> None:
    r = tb.call("NotebookEdit", {"notebook_path": "nb.ipynb", "cell_id": "code-1", "new_source": "y = 2\nprint(y)\n"})
    assert not r.is_error, r.output
    cell = load(tb)["cells"][1]
    assert cell["source"] == ["y = 2\n", "print(y)\n"]
    assert cell["outputs"] == [] and cell["execution_count"] is None
    assert load(tb)["metadata"]["kernelspec"]["name"] == "python3"


def test_insert_after_a_cell_and_at_the_start(tb: Toolbox) -> None:
    r = tb.call(
        "NotebookEdit",
        {
            "notebook_path": "nb.ipynb",
            "cell_id": "intro-md",
            "new_source": "import torch",
            "cell_type": "code",
            "edit_mode": "insert",
        },
    )
    assert not r.is_error
    cells = load(tb)["cells"]
    assert [c["cell_type"] for c in cells] == ["markdown", "code", "code"]
    assert cells[1]["source"] == ["import torch"] and cells[1]["outputs"] == [] and cells[1]["id"]
    tb.call(
        "NotebookEdit",
        {"notebook_path": "nb.ipynb", "new_source": "# Top", "cell_type": "markdown", "edit_mode": "insert"},
    )
    assert load(tb)["cells"][0]["source"] == ["# Top"]
    missing_type = tb.call("NotebookEdit", {"notebook_path": "nb.ipynb", "new_source": "x", "edit_mode": "insert"})
    assert missing_type.is_error and "cell_type" in missing_type.output


def test_delete_and_unknown_cells(tb: Toolbox) -> None:
    assert not tb.call(
        "NotebookEdit", {"notebook_path": "nb.ipynb", "cell_id": "intro-md", "new_source": "", "edit_mode": "delete"}
    ).is_error
    assert [c["id"] for c in load(tb)["cells"]] == ["code-1"]
    r = tb.call("NotebookEdit", {"notebook_path": "nb.ipynb", "cell_id": "nope", "new_source": "x"})
    assert r.is_error and "code-1" in r.output


def test_old_notebooks_are_addressed_by_index(tb: Toolbox) -> None:
    assert not tb.call("NotebookEdit", {"notebook_path": "old.ipynb", "cell_id": "1", "new_source": "z = 3"}).is_error
    nb = load(tb, "old.ipynb")
    assert nb["cells"][1]["source"] == ["z = 3"] and "id" not in nb["cells"][1]
    assert not tb.call(
        "NotebookEdit",
        {"notebook_path": "old.ipynb", "cell_id": "cell-0", "new_source": "# T", "cell_type": "markdown"},
    ).is_error


def test_bad_notebooks_are_reported(tb: Toolbox) -> None:
    assert (
        "not valid notebook JSON"
        in tb.call("NotebookEdit", {"notebook_path": "broken.ipynb", "cell_id": "0", "new_source": "x"}).output
    )
    assert "not a .ipynb" in tb.call("NotebookEdit", {"notebook_path": "x.py", "new_source": "x"}).output
    assert (
        "does not exist"
        in tb.call("NotebookEdit", {"notebook_path": "gone.ipynb", "cell_id": "0", "new_source": "x"}).output
    )
    assert "protected" in tb.call("NotebookEdit", {"notebook_path": ".git/x.ipynb", "new_source": "x"}).output

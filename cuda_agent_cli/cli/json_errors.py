"""`--json` when a command ends in an error: the error object on stdout (docs/optimize.md, "The
`--batch --json` result"), while the entry point still prints its one line on stderr and exits with the
error's code. Scripts read one object whether the session ran or was refused."""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Any, Iterator

import typer

from cuda_agent_cli.errors import CudaAgentError, no_space_left


def error_object(exc: CudaAgentError) -> dict[str, Any]:
    """`{"status": "error", "error": ..., "exit_code": ...}`: what `--json` prints instead of a result."""
    return {"status": "error", "error": exc.one_line(), "exit_code": exc.exit_code}


@contextmanager
def errors_as_json(json_out: bool) -> Iterator[None]:
    """Around a command's body: with --json, an error leaving it is printed as the error object
    first, then raised on to the entry point."""
    try:
        yield
    except CudaAgentError as exc:
        if json_out:
            typer.echo(json.dumps(error_object(exc)))
        raise
    except OSError as exc:
        full = no_space_left(exc)
        if full is None:
            raise
        if json_out:
            typer.echo(json.dumps(error_object(full)))
        raise full from exc

"""The one exception tree of cuda-agent.

Domain code raises these; only the CLI/TUI turn them into a line of text and an exit code
(README, "Exit codes"): 1 the job ran and failed, 2 bad input or usage, 3 environment missing,
130 interrupted. Every error carries a message that says what is wrong and a hint that says
what to do about it.
"""

from __future__ import annotations

import errno


class CudaAgentError(Exception):
    """Base of every error cuda-agent raises on purpose."""

    exit_code: int = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        """The message and the hint joined into the single line a user sees."""
        if self.hint:
            return f"{self.message} — {self.hint}"
        return self.message


class JobFailed(CudaAgentError):
    """The job ran to the end but did not succeed (no correct kernel, a check failed)."""

    exit_code = 1


class BadInput(CudaAgentError):
    """The user asked for something that cannot be done as given (exit 2)."""

    exit_code = 2


class TargetError(BadInput):
    """A `path.py::Class` target that cannot be found, imported or constructed."""


class InputSpecError(BadInput):
    """No way to build example inputs, or an `--inputs` spec that does not parse."""


class ConfigError(BadInput):
    """A configuration value or file that is malformed."""


class ModelConfigError(BadInput):
    """No model configured, or a model string litellm does not know."""


class WorkspaceError(BadInput):
    """A workspace or candidate path that is missing or malformed."""


class WriteBackRefused(BadInput):
    """Applying a kernel would overwrite something the user has not agreed to lose."""


class EnvironmentMissing(CudaAgentError):
    """Something the machine needs is absent: GPU, compiler, bubblewrap, API key (exit 3)."""

    exit_code = 3


class ModelUnavailable(EnvironmentMissing):
    """The model API could not be reached or kept failing after every retry (exit 3)."""


class NoSpaceLeft(EnvironmentMissing):
    """A write failed because its disk is full, or the user's quota on it is used up (exit 3)."""


NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def no_space_left(exc: BaseException, what: str | None = None) -> NoSpaceLeft | None:
    """The NoSpaceLeft that `exc`, or an error behind it, really is; None when it is not one.
    `what` names what was being written ("the session transcript FILE"), else the failed path."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, NoSpaceLeft):
            return current
        if isinstance(current, OSError) and current.errno in NO_SPACE:
            target = what or (str(current.filename) if current.filename else None)
            why = "the disk quota is used up" if current.errno == errno.EDQUOT else "no space left on the device"
            return NoSpaceLeft(
                f"cannot write {target}: {why}" if target else f"cannot write: {why}",
                "free some space there and run the command again (a stopped session continues with --resume ID)",
            )
        current = current.__cause__ or current.__context__
    return None


class ContextOverflow(JobFailed):
    """The conversation no longer fits the model's context window, even after compaction."""


class Interrupted(CudaAgentError):
    """The user pressed Ctrl-C; work done so far is kept (exit 130)."""

    exit_code = 130

"""The one error tree of kictl and the exit codes it maps to.

Domain modules raise these errors and never print or exit; ``kictl.cli.main``
catches them in one place, prints ``error: <diagnostics>`` to stderr and exits
with the class's code:

====  ==========================================================
code  meaning
====  ==========================================================
0     ok
1     a check said no (verification failed, review found lints)
2     usage (a bad option or argument)
3     an invalid or unknown record, digest or name
4     registry, git or I/O
5     environment (no GPU, no key, a missing optional package)
====  ==========================================================

Third-party errors are wrapped with ``raise ... from exc`` so that the cause
stays in the traceback shown by ``--debug``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_INVALID = 3
EXIT_REGISTRY = 4
EXIT_ENVIRONMENT = 5


class KictlError(Exception):
    """Base of every error kictl raises on purpose."""

    exit_code: ClassVar[int] = EXIT_CHECK_FAILED

    def __init__(self, message: str, *, details: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.details = tuple(details)

    def __str__(self) -> str:
        return self.diagnostics()

    def diagnostics(self) -> str:
        """The text shown to the user: the message, then one line per detail."""
        if not self.details:
            return self.message
        return "\n".join([self.message, *self.details])


class CheckFailed(KictlError):
    """A check ran and said no (exit 1)."""

    exit_code = EXIT_CHECK_FAILED


class UsageError(KictlError):
    """The command line asks for something that cannot be done (exit 2)."""

    exit_code = EXIT_USAGE


class RecordError(KictlError):
    """Bytes or values that are not a valid record, JSON document or name (exit 3)."""

    exit_code = EXIT_INVALID


class NotFoundError(KictlError):
    """An unknown or ambiguous digest, name or revision (exit 3)."""

    exit_code = EXIT_INVALID

    def __init__(self, message: str, *, candidates: Iterable[str] = (), details: Iterable[str] = ()) -> None:
        self.candidates = tuple(candidates)
        extra = list(details)
        if self.candidates:
            extra.append("candidates: " + ", ".join(self.candidates))
        super().__init__(message, details=extra)


class RegistryError(KictlError):
    """The registry on disk or its git repository cannot be read or written (exit 4)."""

    exit_code = EXIT_REGISTRY


class EnvError(KictlError):
    """The machine lacks something the command needs: a GPU, a key, a package (exit 5)."""

    exit_code = EXIT_ENVIRONMENT

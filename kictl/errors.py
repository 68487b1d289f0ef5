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

An error about a place in a file carries it as data: ``path`` (the file, or
``<input>``) and ``pointer`` (a JSON path such as ``$.spec.axes.M``).  The
text shown is ``path: pointer: message``; a caller that lists problems per
file (``validate``, ``review``) asks ``at(path)`` for the text without the
file, instead of cutting it out of the message.
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

    def __init__(
        self, message: str, *, details: Iterable[str] = (), path: str | None = None, pointer: str | None = None
    ) -> None:
        self.reason = message
        self.path = path
        self.pointer = pointer
        self.message = ": ".join(part for part in (path, pointer, message) if part)
        self.details = tuple(details)
        super().__init__(self.message)

    def at(self, path: str) -> str:
        """The message as seen from inside ``path``: ``pointer: message`` when the error is about ``path``.

        Errors raised before the location became a field (``canon``'s parse
        errors still write ``source: ...`` into their text) are read the same way.
        """
        if self.path == path:
            return ": ".join(part for part in (self.pointer, self.reason) if part)
        return self.message.removeprefix(f"{path}: ")

    def details_at(self, path: str) -> list[str]:
        """``details`` with a leading ``path: `` dropped (one line per further problem in that file)."""
        return [line.removeprefix(f"{path}: ") for line in self.details]

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

    def __init__(
        self,
        message: str,
        *,
        candidates: Iterable[str] = (),
        details: Iterable[str] = (),
        path: str | None = None,
        pointer: str | None = None,
    ) -> None:
        self.candidates = tuple(candidates)
        extra = list(details)
        if self.candidates:
            extra.append("candidates: " + ", ".join(self.candidates))
        super().__init__(message, details=extra, path=path, pointer=pointer)


class RegistryError(KictlError):
    """The registry on disk or its git repository cannot be read or written (exit 4)."""

    exit_code = EXIT_REGISTRY


class EnvError(KictlError):
    """The machine lacks something the command needs: a GPU, a key, a package (exit 5)."""

    exit_code = EXIT_ENVIRONMENT

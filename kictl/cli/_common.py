"""What every command module shares: options, error handling, output.

Commands parse their options, call one domain function and render its
result.  ``guarded`` turns a ``KictlError`` into ``error: ...`` on stderr and
the error's exit code (``--debug`` re-raises it instead).  stdout carries
data only; ``emit_json`` prints one JSON document with the stdlib encoder.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import typer

from kictl import render
from kictl.cli._state import STATE
from kictl.errors import EXIT_REGISTRY, KictlError, RegistryError
from kictl.render import short as short
from kictl.render import table as table
from kictl.store.git import git_failure
from kictl.store.registry import Registry
from kictl.terminal import json_safe, terminal_safe

P = ParamSpec("P")
R = TypeVar("R")


RegistryOption = Annotated[
    Path | None,
    typer.Option(
        "--registry",
        help="Registry root (default: $KICTL_REGISTRY, else the nearest folder upwards with a registry/ folder).",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")]

#: How every command's help names a record argument (the order of ``kictl.lookup``).
REFERENCE_HELP = "a digest, a unique prefix of 8+ hex digits, a name, or a unique prefix of 8+ characters of a name"


def guarded(func: Callable[P, R]) -> Callable[P, R]:
    """Map ``KictlError`` to its message on stderr and its exit code.

    An I/O or git error that a domain module let through (``io_error``) is exit 4 with one line too: a
    damaged disk or git store is never a traceback, nor exit 1 ("a check said no").
    """

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except KictlError as exc:
            if STATE.debug:
                raise
            print(terminal_safe(f"error: {exc.diagnostics()}"), file=sys.stderr)
            raise typer.Exit(exc.exit_code) from None
        except BrokenPipeError:
            # the reader of stdout went away (`kictl ... | head`): nothing more to say, and no one to say it to
            with contextlib.suppress(OSError, ValueError):  # Python's own flush at exit would fail the same way
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(EXIT_REGISTRY) from None
        except Exception as exc:
            mapped = io_error(exc)
            if mapped is None or STATE.debug:
                raise
            print(terminal_safe(f"error: {mapped.diagnostics()}"), file=sys.stderr)
            raise typer.Exit(mapped.exit_code) from None
        finally:
            _domain_warnings()

    return wrapper


def _domain_warnings() -> None:
    """Print what the domain queued for stderr: a deleted harness advisory (``kictl.advisories.memory``)."""
    memory = sys.modules.get("kictl.advisories.memory")  # queued only where it was imported
    if memory is not None:
        for line in memory.take_warnings():
            print(terminal_safe(f"warning: {line}"), file=sys.stderr)


def io_error(exc: BaseException) -> RegistryError | None:
    """``exc`` as the ``RegistryError`` (exit 4) it is, when it is an I/O, git or sqlite failure; else ``None``.

    The line names the file (``OSError.filename``) or the repository, and what to do.
    """
    module = type(exc).__module__.split(".")[0]
    if module in ("git", "gitdb"):
        stderr = getattr(exc, "stderr", None)
        text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else str(stderr or exc)
        where = getattr(exc, "_kictl_root", None) or "the registry"
        return git_failure(Path(str(where)), _git_action(exc), text.strip().removeprefix("stderr:").strip(" '"))
    if isinstance(exc, OSError):
        name = exc.filename if exc.filename is not None else "a file"
        reason = exc.strerror or type(exc).__name__
        return RegistryError(f"{name}: {reason}; check the path and its permissions (or free disk space)")
    if module == "sqlite3":
        return RegistryError(
            f"the query index under .kictl/ cannot be used ({exc}); remove the registry's .kictl/ folder "
            "to rebuild it, or check that the disk is writable"
        )
    return None


def _git_action(exc: BaseException) -> str:
    command = getattr(exc, "command", None)
    if isinstance(command, list | tuple) and len(command) > 1:
        return str(command[1])
    return "read"


#: The one latency formatter (``kictl.render.latency``), under the name command modules use.
format_ns = render.latency


def open_registry(path: Path | None) -> Registry:
    return Registry.locate(path)


def emit_json(document: Any) -> None:
    """One JSON document on stdout."""
    sys.stdout.write(json_safe(json.dumps(document, indent=2, ensure_ascii=False)) + "\n")


def out(line: str = "") -> None:
    """A line of data on stdout (``kictl.terminal``: nothing a record says can drive the terminal)."""
    sys.stdout.write(terminal_safe(line) + "\n")


def err(line: str = "") -> None:
    """A line of logging on stderr (made terminal-safe like ``out``)."""
    sys.stderr.write(terminal_safe(line) + "\n")

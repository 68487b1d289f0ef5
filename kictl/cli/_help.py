"""Help that reads like a command line, not like Python: no ``<bool>``, ``<list[Path]>`` or ``<str>``.

Typer (0.29) shows each parameter's Python annotation in ``--help`` unless the
parameter has a metavar, and shows it for arguments always.  ``HelpGroup``,
the root command group (typer's documented ``cls=`` hook), gives every
parameter of every command a metavar the first time the command is looked
up: none for flags (``--json``, ``--help``), the choices for a choice, else
``TEXT``, ``INTEGER``, ``FLOAT`` or ``PATH`` as click names them; and an
argument's type column is left out (its name already says what it takes).
Metavars a command sets itself (``--key KEY``, ``--shard i/N``) are kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args, get_origin

from typer.core import TyperArgument, TyperGroup

_NAMES = {int: "INTEGER", float: "FLOAT", str: "TEXT", Path: "PATH"}


def _element(annotation: Any) -> Any:
    """``str`` for ``list[str]``, ``Path`` for ``Path | None``, the annotation itself otherwise."""
    if get_origin(annotation) in (list, tuple):
        args = get_args(annotation)
        return _element(args[0]) if args else annotation
    members = [arg for arg in get_args(annotation) if arg is not type(None)]
    return _element(members[0]) if len(members) == 1 else annotation


def _metavar(param: Any) -> str:
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is None:
        return ""
    if getattr(descriptor, "is_choice", False) and descriptor.choices:
        return "|".join(str(getattr(choice, "value", choice)) for choice in descriptor.choices)
    element = _element(descriptor.annotation)
    if getattr(descriptor, "is_path", False):
        return "PATH"
    return _NAMES.get(element, "VALUE")


def _no_type(ctx: Any) -> None:
    """An argument's help shows its name only."""
    return None


def tidy_parameter(param: Any) -> None:
    """Give ``param`` a command-line metavar (in place; idempotent)."""
    if isinstance(param, TyperArgument):
        # typer shows an argument's annotation whatever its metavar; this instance shows none
        setattr(param, "display_type_rich", _no_type)  # noqa: B010
        return
    if param.metavar is not None:
        return
    param.metavar = "" if getattr(param, "is_flag", False) else _metavar(param)


def tidy_command(command: Any, ctx: Any) -> Any:
    """Tidy every parameter of ``command`` and, for a group, of every command below it; returns ``command``."""
    if getattr(command, "_kictl_tidy", False):
        return command
    for param in command.params:
        tidy_parameter(param)
    help_option = command.get_help_option(ctx)
    if help_option is not None:
        tidy_parameter(help_option)
    for child in getattr(command, "commands", {}).values():
        tidy_command(child, ctx)
    command._kictl_tidy = True
    return command


class HelpGroup(TyperGroup):
    """kictl's root group: every command's help without Python type names (this module's docstring)."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        return None if command is None else tidy_command(command, ctx)

    def get_params(self, ctx: Any) -> Any:
        tidy_command(self, ctx)
        return super().get_params(ctx)

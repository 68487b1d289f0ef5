"""Help that reads like a command line, not like Python: no ``<bool>``, ``<list[Path]>`` or ``<str>``.

Typer (0.29) shows each parameter's Python annotation in ``--help`` unless the
parameter has a metavar, and shows it for arguments always.  ``HelpGroup``,
the root command group (typer's documented ``cls=`` hook), gives every
parameter of every command a metavar the first time the command is looked
up: none for flags (``--json``, ``--help``), the choices for a choice, else
``TEXT``, ``INTEGER``, ``FLOAT`` or ``PATH`` as click names them; and an
argument's type column is left out (its name already says what it takes).
Metavars a command sets itself (``--key KEY``, ``--shard i/N``) are kept.
Help is plain text (click's layout, no rich panels: they cost more CPU to
import than the rest of ``kictl --help``).  An argument shows as ``NAME`` (``[NAME]`` when optional) in the usage line,
not typer's ``{name}``.

The same hook makes parsing cheap.  Typer 0.29 converts every parameter
through a pydantic ``TypeAdapter`` built on first use: importing pydantic and
building the adapters costs a read command a large part of its start-up.
``fast_runtime_param`` converts the plain values kictl's commands take
(``bool``, ``str``, ``int``, ``float``, ``Path`` and lists of them, without bounds)
directly, through typer's own path checks; any value it does not recognise
as plainly valid (and any other annotation) goes to typer's adapter, so
errors read exactly as typer words them.  tests/test_help.py holds the two
conversions equal.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args, get_origin

from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
from typer._param_types import coerce_cli_path
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


_INTEGER = re.compile(r"-?(0|[1-9][0-9]*)")
_DECIMAL = re.compile(r"-?[0-9]+(\.[0-9]+)?")

#: A value's fast conversion: the converted value, or ``_TYPER`` to hand the value to typer's own.
_TYPER = object()
Convert = Callable[[Any, TypeDescriptor, Any, Any], Any]


def _as_str(value: Any, descriptor: TypeDescriptor, param: Any, ctx: Any) -> Any:
    return value if isinstance(value, str) else _TYPER


def _as_bool(value: Any, descriptor: TypeDescriptor, param: Any, ctx: Any) -> Any:
    return value if isinstance(value, bool) else _TYPER


def _as_int(value: Any, descriptor: TypeDescriptor, param: Any, ctx: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return int(value) if isinstance(value, str) and _INTEGER.fullmatch(value) else _TYPER


def _as_float(value: Any, descriptor: TypeDescriptor, param: Any, ctx: Any) -> Any:
    if isinstance(value, float):
        return value
    return float(value) if isinstance(value, str) and _DECIMAL.fullmatch(value) else _TYPER


def _as_path(value: Any, descriptor: TypeDescriptor, param: Any, ctx: Any) -> Any:
    if not isinstance(value, str | Path):
        return _TYPER
    # typer's own checks (exists, file_okay, readable...); a Path in needs no pydantic to become one
    return coerce_cli_path(Path(value), descriptor.parameter_info, path_type=Path, param=param, ctx=ctx)


_CONVERTERS: dict[Any, Convert] = {bool: _as_bool, str: _as_str, int: _as_int, float: _as_float, Path: _as_path}


@dataclass(frozen=True)
class _PlainParam(RuntimeParam):
    """A parameter converted without pydantic where the value is plainly valid (this module's docstring)."""

    descriptor: TypeDescriptor
    convert: Convert
    many: bool

    def _one(self, value: Any, param: Any, ctx: Any) -> Any:
        converted = self.convert(value, self.descriptor, param, ctx)
        if converted is _TYPER:
            leaf = TypeDescriptor(self.element(), self.parameter_info, None)
            return build_runtime_param(leaf)._coerce_value(value, param=param, ctx=ctx)
        return converted

    def element(self) -> Any:
        return get_args(self.annotation)[0] if self.many else self.annotation

    def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
        if self.many:
            return [self._one(item, param, ctx) for item in (value if isinstance(value, list | tuple) else [value])]
        return self._one(value, param, ctx)


def fast_runtime_param(descriptor: TypeDescriptor) -> RuntimeParam | None:
    """A pydantic-free conversion for ``descriptor``, or None where typer's own must do it."""
    info = descriptor.parameter_info
    if descriptor.file_annotation is not None or info.parser is not None or info.path_type is not None:
        return None
    if info.min is not None or info.max is not None or info.clamp:
        return None
    annotation: Any = descriptor.annotation
    many = get_origin(annotation) is list and len(get_args(annotation)) == 1
    element = get_args(annotation)[0] if many else annotation
    convert = _CONVERTERS.get(element)
    if convert is None:
        return None
    return _PlainParam(info, annotation, descriptor, convert, many)


def _usage_name(param: Any) -> Callable[[], str]:
    def name() -> str:
        shown = param.metavar or param.name.upper()
        shown = shown if param.required else f"[{shown}]"
        return shown + ("..." if param.nargs != 1 else "")

    return name


def tidy_parameter(param: Any) -> None:
    """Give ``param`` a command-line metavar and a pydantic-free conversion (in place; idempotent)."""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is not None and getattr(param, "_runtime_param", None) is None:
        param._runtime_param = fast_runtime_param(descriptor)
    if isinstance(param, TyperArgument):
        # typer shows an argument's annotation whatever its metavar; this instance shows none
        setattr(param, "display_type_rich", _no_type)  # noqa: B010
        setattr(param, "_usage_display_name", _usage_name(param))  # noqa: B010
        return
    if param.metavar is not None:
        return
    param.metavar = "" if getattr(param, "is_flag", False) else _metavar(param)


def tidy_command(command: Any, ctx: Any) -> Any:
    """Tidy every parameter of ``command`` and, for a group, of every command below it; returns ``command``."""
    if getattr(command, "_kictl_tidy", False):
        return command
    # plain help, as click writes it: typer's rich panels import rich's markdown, syntax and traceback
    # modules (about 0.2 s of CPU) before the first line of help
    command.rich_markup_mode = None
    for param in command.params:
        tidy_parameter(param)
    help_option = command.get_help_option(ctx)
    if help_option is not None:
        tidy_parameter(help_option)
    for child in getattr(command, "commands", {}).values():
        tidy_command(child, ctx)
    command._kictl_tidy = True
    return command


def docs_pointer(command: Any, page: str) -> None:
    """End ``command``'s help with the page of the kictl repository that documents it (once)."""
    pointer = f"Docs: {page} in the kictl repository."
    if pointer not in (command.epilog or ""):
        command.epilog = f"{command.epilog}\n\n{pointer}" if command.epilog else pointer


class HelpGroup(TyperGroup):
    """kictl's root group: every command's help without Python type names (this module's docstring)."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        tidy_command(self, ctx)
        command = super().get_command(ctx, cmd_name)
        return None if command is None else tidy_command(command, ctx)

    def get_params(self, ctx: Any) -> Any:
        tidy_command(self, ctx)
        return super().get_params(ctx)

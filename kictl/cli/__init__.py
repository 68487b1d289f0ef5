"""The ``kictl`` command line: assembles one command group per module.

Exit codes: 0 ok, 1 a check said no, 2 usage, 3 an invalid or unknown
record, digest or name, 4 registry, git or I/O, 5 environment (no GPU, no
key).  stdout carries data, stderr everything else.
"""

from __future__ import annotations

import importlib
import os
import sys

# kictl's models use no pydantic plugins; skipping their discovery (an entry-point scan) saves start-up time.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from typing import Annotated

import typer

from kictl import __version__
from kictl.cli._common import STATE
from kictl.cli._help import HelpGroup

EPILOG = (
    "Exit codes: 0 ok, 1 a check said no, 2 usage, 3 invalid or unknown record/digest/name, "
    "4 registry/git/I/O, 5 environment (no GPU, no key). "
    "Docs: README.md and docs/*.md in the kictl repository; each command's --help names its page."
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kictl {__version__}")
        raise typer.Exit()


def make_app(command: str | None = None) -> typer.Typer:
    """The kictl application with every command group registered, or only the one that adds ``command``."""
    app = typer.Typer(
        name="kictl",
        help="KernelIndex: benchmark results of GPU kernels as signed, content-addressed records.",
        epilog=EPILOG,
        no_args_is_help=True,
        pretty_exceptions_show_locals=False,
        add_completion=False,
        rich_markup_mode=None,  # plain help and usage errors (kictl/cli/_help.py says why)
        cls=HelpGroup,
    )

    @app.callback()
    def _root(
        debug: Annotated[bool, typer.Option("--debug", help="Re-raise errors with their traceback.")] = False,
        verbose: Annotated[
            bool,
            typer.Option(
                "--verbose",
                help="Say more: a failed run's whole statusDetail under its line (bench), and let the tools "
                "kictl drives (Ray) log as they do; also KICTL_VERBOSE=1.",
            ),
        ] = False,
        version: Annotated[
            bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
        ] = False,
    ) -> None:
        STATE.debug = debug
        if verbose:
            os.environ["KICTL_VERBOSE"] = "1"  # read where Ray is started (kictl/executors/ray_executor.py)

    names = (COMMANDS[command],) if command in COMMANDS else GROUPS
    for name in names:
        _register(app, name)
    return app


#: The command modules, in the order ``kictl --help`` lists their commands.
GROUPS = (
    "records",
    "bench",
    "definitions",
    "trust",
    "rank",
    "compare",
    "importers",
    "exporters",
    "submit",
    "review",
    "rerun",
    "site",
    "advisory",
    "selftest",
)
#: Which module adds each top-level command (tests/test_startup.py holds this equal to what they register).
COMMANDS = {
    **dict.fromkeys(("init", "digest", "add", "validate", "show"), "records"),
    "bench": "bench",
    "definitions": "definitions",
    **dict.fromkeys(("keygen", "sign", "verify", "trust"), "trust"),
    **dict.fromkeys(("leaderboard", "floor"), "rank"),
    **dict.fromkeys(("diff", "history", "cite"), "compare"),
    "import": "importers",
    "export": "exporters",
    "submit": "submit",
    "review": "review",
    **dict.fromkeys(("rerun", "attest"), "rerun"),
    "site": "site",
    "advisory": "advisory",
    "selftest": "selftest",
}


def _register(app: typer.Typer, name: str) -> None:
    module = importlib.import_module(f"kictl.cli.{name}")
    if name == "definitions":
        app.add_typer(module.app, name="definitions")
    elif name == "importers":
        app.add_typer(module.app, name="import")
    elif name == "exporters":
        app.add_typer(module.app, name="export")
    else:
        module.register(app)


def _command_of(args: list[str]) -> str | None:
    """The command a command line names: its first word that is not a root option (those take no value)."""
    return next((arg for arg in args if not arg.startswith("-")), None)


def main() -> None:
    """Entry point of the ``kictl`` console script.

    Only the module of the command asked for is imported and built (a read
    command starts in less CPU time); ``--help``, no command or an unknown one
    build them all, so that help and "no such command" list every command.
    """
    make_app(_command_of(sys.argv[1:]))()

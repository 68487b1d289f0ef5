"""The ``kictl`` command line: assembles one command group per module.

Exit codes: 0 ok, 1 a check said no, 2 usage, 3 an invalid or unknown
record, digest or name, 4 registry, git or I/O, 5 environment (no GPU, no
key).  stdout carries data, stderr everything else.
"""

from __future__ import annotations

import os

# kictl's models use no pydantic plugins; skipping their discovery (an entry-point scan) saves start-up time.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from typing import Annotated

import typer

from kictl import __version__
from kictl.cli import bench, definitions, importers, rank, records, rerun, review, site, submit, trust
from kictl.cli._common import STATE
from kictl.cli._help import HelpGroup

EPILOG = (
    "Exit codes: 0 ok, 1 a check said no, 2 usage, 3 invalid or unknown record/digest/name, "
    "4 registry/git/I/O, 5 environment (no GPU, no key)."
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kictl {__version__}")
        raise typer.Exit()


def make_app() -> typer.Typer:
    """The kictl application with every command group registered."""
    app = typer.Typer(
        name="kictl",
        help="KernelIndex: benchmark results of GPU kernels as signed, content-addressed records.",
        epilog=EPILOG,
        no_args_is_help=True,
        pretty_exceptions_show_locals=False,
        add_completion=False,
        cls=HelpGroup,
    )

    @app.callback()
    def _root(
        debug: Annotated[bool, typer.Option("--debug", help="Re-raise errors with their traceback.")] = False,
        version: Annotated[
            bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
        ] = False,
    ) -> None:
        STATE.debug = debug

    records.register(app)
    bench.register(app)
    app.add_typer(definitions.app, name="definitions")
    trust.register(app)
    rank.register(app)
    app.add_typer(importers.app, name="import")
    submit.register(app)
    review.register(app)
    rerun.register(app)
    site.register(app)
    return app


def main() -> None:
    """Entry point of the ``kictl`` console script."""
    make_app()()

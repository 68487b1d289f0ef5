"""The ``kictl`` command line: a table of its commands, each command's module imported when that command runs.

``COMMANDS`` names every top-level command with the line ``kictl --help`` shows for it, the docs page its
help points to and the function that adds it (and the commands its module adds beside it) to the root
group.  Those functions are the one place kictl imports late: ``kictl --help`` lists the table without
importing a command module, and ``kictl leaderboard`` imports ``kictl.cli.rank`` and, through it, the
core.  Every other module imports at its top.  A kept command (``leaderboard``) is first asked of the
kept answers (``kictl.cli.answers``): a hit prints them and imports nothing of the command.
tests/test_startup.py holds the table equal to what the modules add.

Exit codes: 0 ok, 1 a check said no, 2 usage, 3 an invalid or unknown
record, digest or name, 4 registry, git or I/O, 5 environment (no GPU, no
key).  stdout carries data, stderr everything else.
"""

from __future__ import annotations

import os

# kictl's models use no pydantic plugins; skipping their discovery (an entry-point scan) saves start-up time.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from collections.abc import Callable
from dataclasses import dataclass
from difflib import get_close_matches
from pathlib import Path
from typing import Annotated, Any

import typer
import typer._click as click
import typer.main
from typer._click.formatting import HelpFormatter
from typer._click.utils import make_default_short_help
from typer.core import TyperCommand

from kictl import __version__
from kictl.cli import answers
from kictl.cli._help import HelpGroup, docs_pointer
from kictl.cli._state import STATE

EPILOG = (
    "Exit codes: 0 ok, 1 a check said no, 2 usage, 3 invalid or unknown record/digest/name, "
    "4 registry/git/I/O, 5 environment (no GPU, no key). "
    "Docs: README.md and docs/*.md in the kictl repository; each command's --help names its page."
)


# --------------------------------------------------------------------------- the command table: its only late imports


def _records(app: typer.Typer) -> None:
    from kictl.cli import records

    records.register(app)


def _bench(app: typer.Typer) -> None:
    from kictl.cli import bench

    bench.register(app)


def _trust(app: typer.Typer) -> None:
    from kictl.cli import trust

    trust.register(app)


def _rank(app: typer.Typer) -> None:
    from kictl.cli import rank

    rank.register(app)


def _compare(app: typer.Typer) -> None:
    from kictl.cli import compare

    compare.register(app)


def _submit(app: typer.Typer) -> None:
    from kictl.cli import submit

    submit.register(app)


def _review(app: typer.Typer) -> None:
    from kictl.cli import review

    review.register(app)


def _rerun(app: typer.Typer) -> None:
    from kictl.cli import rerun

    rerun.register(app)


def _selftest(app: typer.Typer) -> None:
    from kictl.cli import selftest

    selftest.register(app)


def _definitions(app: typer.Typer) -> None:
    from kictl.cli import definitions

    app.add_typer(definitions.app, name="definitions")


def _importers(app: typer.Typer) -> None:
    from kictl.cli import importers

    app.add_typer(importers.app, name="import")


def _exporters(app: typer.Typer) -> None:
    from kictl.cli import exporters

    app.add_typer(exporters.app, name="export")


def _site(app: typer.Typer) -> None:
    from kictl.cli import site

    site.register(app)


def _advisory(app: typer.Typer) -> None:
    from kictl.cli import advisory

    advisory.register(app)


@dataclass(frozen=True)
class Command:
    """A top-level command as ``kictl --help`` lists it, before its module is imported."""

    #: the first sentence of its help (tests/test_startup.py holds them equal)
    summary: str
    #: the page of the kictl repository that documents it (its help ends with it)
    page: str
    #: adds the command, and the others of its module, to a Typer app (imports the module)
    add: Callable[[typer.Typer], None]
    #: its output is kept for the registry's state (``kictl.cli.answers``)
    kept: bool = False


#: Every top-level command, in the order ``kictl --help`` lists them.
COMMANDS: dict[str, Command] = {
    "init": Command(
        "Create a new, empty registry: a git repository with a trust root and a policy.", "docs/records.md", _records
    ),
    "digest": Command("Print the digest, kind and name of each record in FILES.", "docs/records.md", _records),
    "add": Command(
        "Validate records and store them in the registry; nothing is written if any is invalid.",
        "docs/records.md",
        _records,
    ),
    "validate": Command(
        "Check every record, blob, attestation and definition folder of the registry.", "docs/records.md", _records
    ),
    "show": Command(
        "Print a record found by digest, digest prefix or name, with its evidence level and attestations.",
        "docs/records.md",
        _records,
    ),
    "bench": Command(
        "Benchmark implementations of DEFINITION on its workloads and record the results.", "docs/bench.md", _bench
    ),
    "keygen": Command("Create an Ed25519 key pair and print its keyid.", "docs/trust.md", _trust),
    "sign": Command(
        "Sign an attestation about a record and store it under registry/attestations/; print its path.",
        "docs/trust.md",
        _trust,
    ),
    "verify": Command(
        "Check a record, every record it references, and every attestation about it.", "docs/trust.md", _trust
    ),
    "leaderboard": Command(
        "The fastest correct implementations of a definition, per GPU and workload.",
        "docs/leaderboards.md",
        _rank,
        kept=True,
    ),
    "floor": Command(
        "The physical floor of a definition's workloads on a datasheet GPU.", "docs/leaderboards.md", _rank
    ),
    "diff": Command(
        "Compare two records field by field, or the registry at two git revisions.", "docs/leaderboards.md", _compare
    ),
    "history": Command(
        "When each related record entered the registry (git: commit, date, author) and how #1 changed.",
        "docs/leaderboards.md",
        _compare,
    ),
    "cite": Command(
        "How to cite a record: title, digest, permalink, the commit that added it, the access date.",
        "docs/leaderboards.md",
        _compare,
    ),
    "submit": Command(
        "Submit records as one signed commit on a new branch, ready for a pull request.", "docs/submitting.md", _submit
    ),
    "review": Command(
        "Review the files a registry PR changes: lints fail it (exit 1), hints advise.", "docs/review.md", _review
    ),
    "rerun": Command(
        "Rerun published BenchmarkRuns here, from the registry's records, and judge each against its original.",
        "docs/rerun.md",
        _rerun,
    ),
    "selftest": Command(
        "Run the exploit corpus (tests/assets/cheats) against this harness and say which entries it catches.",
        "docs/advisories.md",
        _selftest,
    ),
    "definitions": Command("Compile and list definitions.", "docs/records.md", _definitions),
    "trust": Command(
        "The trust root: keys, roles, validity and revocation (registry/trust/).", "docs/trust.md", _trust
    ),
    "import": Command("Import results of other harnesses.", "docs/importing.md", _importers),
    "export": Command("Export records in other harnesses' formats.", "docs/exporting.md", _exporters),
    "attest": Command("Check results made elsewhere and sign attestations about them.", "docs/rerun.md", _rerun),
    "site": Command(
        "The index's static pages: build them from the registry, serve them locally.", "docs/site.md", _site
    ),
    "advisory": Command(
        "Harness advisories: signed notices of a hole in the harness, and the published runs it touches.",
        "docs/advisories.md",
        _advisory,
    ),
}


class CommandTable(HelpGroup):
    """kictl's root group: lists ``COMMANDS`` without importing them, and adds a command's module to itself
    the first time one of its commands is asked for (to run, or for its help)."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.suggest_commands = False  # ``resolve_command`` suggests from the whole table

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is not None and cmd_name not in self.commands:
            self._add(entry)
        command: click.Command | None = super().get_command(ctx, cmd_name)
        return command

    def _add(self, entry: Command) -> None:
        """Add the commands of ``entry``'s module, each with its docs page at the end of its help."""
        module_app = typer.Typer(add_completion=False, rich_markup_mode=None)
        entry.add(module_app)
        for name, command in typer.main.get_group(module_app).commands.items():
            docs_pointer(command, COMMANDS[name].page)
            self.commands[name] = command

    def format_commands(self, ctx: click.Context, formatter: HelpFormatter) -> None:
        """The table's lines, as click words a group's list of commands (no module is imported)."""
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = [(name, make_default_short_help(entry.summary, limit)) for name, entry in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        entry = COMMANDS.get(args[0])
        if entry is not None and entry.kept and "--help" not in args[1:]:
            return args[0], _Kept(args[0], self), args[1:]
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.UsageError as error:
            # typer's "Did you mean" reads the commands added so far: the table's names instead
            matches = get_close_matches(args[0], list(COMMANDS)) if entry is None else []
            if matches:
                error.message = f"{error.message.rstrip('.')}. Did you mean {', '.join(map(repr, matches))}?"
            raise


class _Kept(TyperCommand):
    """A kept command before its module is imported: its kept answer is printed when it holds
    (``kictl.cli.answers.answered``), else the command is added, parsed and run as any other."""

    def __init__(self, name: str, table: CommandTable) -> None:
        super().__init__(name, add_help_option=False)
        self._table = table

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        context = click.Context(self, info_name=info_name, parent=parent, **extra)
        context.args = list(args)  # the command's own parser reads them (``invoke``)
        return context

    def invoke(self, ctx: click.Context) -> Any:
        parent = ctx.parent
        assert parent is not None
        assert self.name is not None
        name, args = self.name, list(ctx.args)
        line = [name, *args, *(f"{key}={value}" for key, value in sorted(parent.params.items()))]
        registry = answers.option_value(args, "--registry")

        def run() -> Any:
            command = self._table.get_command(parent, name)
            assert command is not None
            with command.make_context(name, list(args), parent=parent) as context:
                return command.invoke(context)

        answers.answered(None if registry is None else Path(registry), line, run)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kictl {__version__}")
        raise typer.Exit()


def make_app() -> typer.Typer:
    """The kictl application: its root options, and every command of ``COMMANDS`` added when asked for."""
    app = typer.Typer(
        name="kictl",
        help="KernelIndex: benchmark results of GPU kernels as signed, content-addressed records.",
        epilog=EPILOG,
        no_args_is_help=True,
        pretty_exceptions_show_locals=False,
        add_completion=False,
        rich_markup_mode=None,  # plain help and usage errors (kictl/cli/_help.py says why)
        cls=CommandTable,
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

    return app


def every_command() -> CommandTable:
    """The root group with every command of the table added: what a tool that walks the commands reads (the
    tests of help, exit codes and the docs' examples).  ``kictl`` itself adds a command when it is asked for."""
    root = typer.main.get_command(make_app())
    assert isinstance(root, CommandTable)
    for name in COMMANDS:
        root.get_command(click.Context(root), name)
    return root


def main() -> None:
    """Entry point of the ``kictl`` console script."""
    make_app()()

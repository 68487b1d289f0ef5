"""``kictl import``: bring results of other harnesses into the registry.

``kictl import flashinfer-bench PATH`` reads a FlashInfer Trace dataset and
stores its definitions, workloads, solutions and traces as records
(``kictl.importers.flashinfer_bench``).  stdout lists the records (or, with
``--json``, one document with the whole report); stderr carries the summary,
the notes and each skipped item as ``file:line: message``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kictl.cli._common import JsonOption, RegistryOption, emit_json, err, guarded, open_registry, out, short
from kictl.errors import CheckFailed
from kictl.importers.flashinfer_bench import import_flashinfer_bench
from kictl.records import KINDS

if TYPE_CHECKING:
    from kictl.importers.flashinfer_bench import ImportReport

app = typer.Typer(help="Import results of other harnesses.", no_args_is_help=True)

WIDTH = 100
MISSING_SHOWN = 3
SAME_REASON_SHOWN = 3


@app.command("flashinfer-bench")
@guarded
def flashinfer_bench(
    path: Annotated[
        Path,
        typer.Argument(
            help="A FlashInfer Trace dataset folder (definitions/, solutions/, workloads/, traces/).",
            show_default=False,
        ),
    ],
    registry: RegistryOption = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Write nothing; say what would be added.")] = False,
    allow_redefinition: Annotated[
        bool,
        typer.Option(
            "--allow-redefinition",
            help="Import a definition even when the registry has another Definition of its name "
            "(a second version; the name then needs a digest to pick one).",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Import a FlashInfer Trace dataset: definitions, workloads, solutions and traces become records.

    Importing the same dataset again adds nothing. An item that cannot be
    imported is reported as `file:line: message` and skipped; the rest is
    imported and the exit code is 1. So is a definition whose name the registry
    already gives to another Definition, with all that depends on it (import
    into a scratch registry instead: docs/importing.md). Symlinks leading out
    of the dataset are never followed. Exit 2 when PATH is no dataset, 4 when
    the registry cannot be written (nothing of the import is left behind).
    """
    target = open_registry(registry)
    report = import_flashinfer_bench(target, path, dry_run=dry_run, allow_redefinition=allow_redefinition)
    if as_json:
        emit_json(report.to_json())
    else:
        for outcome in report.outcomes:
            state = "new" if outcome.new else "present"
            line = f"{state:<7}  {outcome.record.kind:<20}  {short(outcome.record.digest)}  {outcome.record.name}"
            out(line if len(line) <= WIDTH else line[: WIDTH - 1] + "…")
    _summary(report)
    if not report.ok:
        raise CheckFailed(f"{len(report.skipped)} item(s) skipped; the rest was {_verb(report)}")


def _verb(report: ImportReport) -> str:
    return "checked (dry run)" if report.dry_run else "imported"


def _summary(report: ImportReport) -> None:
    """The per-kind counts, notes, missing blobs and skipped items, on stderr."""
    header = "dry run, nothing written: " if report.dry_run else ""
    err(f"{header}{report.source} -> {report.registry}")
    err(f"{'kind':<22}{'new':>7}{'present':>9}{'skipped':>9}")
    counts = report.counts()
    for kind in KINDS:
        row = counts[kind]
        err(f"{kind:<22}{row['new']:>7}{row['present']:>9}{row['skipped']:>9}")
    err(f"{'blobs':<22}{report.blobs_new:>7}{report.blobs_present:>9}  {len(report.missing_blobs)} missing")
    for note in report.notes:
        err(f"note: {note}")
    for blob in report.missing_blobs[:MISSING_SHOWN]:
        err(f"missing blob: {blob.path} ({blob.inputs} input(s) of {len(blob.workloads)} workload(s))")
    if len(report.missing_blobs) > MISSING_SHOWN:
        err(f"missing blob: … and {len(report.missing_blobs) - MISSING_SHOWN} more (--json lists them all)")
    _skipped(report)


def _skipped(report: ImportReport) -> None:
    """Each skipped item, one line each; a reason shared by many items is shown once, with their count."""
    shown: dict[str, int] = {}
    for item in report.skipped:
        seen = shown.get(item.message, 0)
        shown[item.message] = seen + 1
        if seen < SAME_REASON_SHOWN:
            err(f"skipped: {item}")
    for message, count in shown.items():
        if count > SAME_REASON_SHOWN:
            more = count - SAME_REASON_SHOWN
            err(f"skipped: … and {more} more item(s) for the same reason: {message} (--json lists them all)")

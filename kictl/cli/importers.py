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
from kictl.records import KINDS

if TYPE_CHECKING:
    from kictl.importers.flashinfer_bench import ImportReport

app = typer.Typer(help="Import results of other harnesses.", no_args_is_help=True)

WIDTH = 100
MISSING_SHOWN = 3


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
    as_json: JsonOption = False,
) -> None:
    """Import a FlashInfer Trace dataset: definitions, workloads, solutions and traces become records.

    Importing the same dataset again adds nothing. An item that cannot be
    imported is reported as `file:line: message` and skipped; the rest is
    imported and the exit code is 1. Exit 2 when PATH is no dataset, 4 when the
    registry cannot be written (nothing of the import is left behind).
    """
    target = open_registry(registry)
    from kictl.importers.flashinfer_bench import import_flashinfer_bench

    report = import_flashinfer_bench(target, path, dry_run=dry_run)
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
    for item in report.skipped:
        err(f"skipped: {item}")

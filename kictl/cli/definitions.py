"""``kictl definitions``: compile the editable definitions and list what the registry defines."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kictl.cli._common import JsonOption, RegistryOption, emit_json, err, guarded, open_registry, out, short, table
from kictl.definitions import PLACEMENT_LABELS, compile_all, definition_rows, read_catalogue
from kictl.importers.flashinfer_bench.catalogue import write_catalogue
from kictl.records import BenchmarkRun, Workload
from kictl.store.files import Transaction

if TYPE_CHECKING:
    pass

app = typer.Typer(help="Compile and list definitions.", no_args_is_help=True)


@app.command("compile")
@guarded
def compile_command(
    name: Annotated[str | None, typer.Argument(help="Only this definition (default: all).")] = None,
    registry: RegistryOption = None,
    as_json: JsonOption = False,
) -> None:
    """Build the Definition and Workload records of definitions/<family>/<name>/ and store them."""
    target = open_registry(registry)
    compiled = compile_all(target.root, name)
    rows = []
    with Transaction() as transaction:
        for item in compiled:
            records = [item.definition, *item.workloads]
            for result in target.add(records, transaction=transaction):
                rows.append((result.record, result.created))
    if as_json:
        emit_json([{"digest": r.digest, "kind": r.kind, "name": r.name, "created": created} for r, created in rows])
    else:
        for record, created in rows:
            out(f"{record.digest}  {record.kind:<10}  {record.name}  {'added' if created else 'present'}")
    err(f"{len(compiled)} definition(s), {sum(created for _, created in rows)} new record(s)")


@app.command("list")
@guarded
def list_command(registry: RegistryOption = None, as_json: JsonOption = False) -> None:
    """List the registry's definitions with their workloads and runs.

    A run whose file does not match its digest is not counted, as no reader counts it.
    """
    target = open_registry(registry)
    definitions = list(target.iter_records(["Definition"]))
    workloads: dict[str, int] = {}
    workload_definition: dict[str, str] = {}
    for record in target.iter_records(["Workload"]):
        assert isinstance(record.model, Workload)
        key = record.model.spec.definition_digest
        workloads[key] = workloads.get(key, 0) + 1
        workload_definition[record.digest] = key
    runs: dict[str, int] = {}
    for _, path in target.record_files(["BenchmarkRun"]):
        record = target.read_record(path)
        assert isinstance(record.model, BenchmarkRun)
        if record.digest.removeprefix("sha256:") != path.stem:
            continue
        definition = workload_definition.get(record.model.spec.workload_digest)
        if definition is not None:
            runs[definition] = runs.get(definition, 0) + 1
    rows = definition_rows(definitions, workloads, runs, read_catalogue(target.root))
    if as_json:
        emit_json(rows)
        return
    for line in table(
        ["definition", "family", "workloads", "runs", "runs on", "digest"],
        [
            [
                str(r["name"]),
                str(r["family"]),
                str(r["workloads"]),
                str(r["runs"]),
                str(PLACEMENT_LABELS.get(str(r["runsOn"]), "–")),
                short(str(r["digest"])) if r["digest"] else f"unrepresented: {r['reason']}",
            ]
            for r in rows
        ],
        right=(2, 3),
    ):
        out(line)


@app.command("catalogue")
@guarded
def catalogue_command(
    dataset: Annotated[Path, typer.Argument(help="A FlashInfer Trace folder (definitions/, workloads/).")],
    commit: Annotated[str, typer.Option("--commit", help="The source's full commit, recorded in provenance.")],
    source: Annotated[
        str, typer.Option("--source", help="The source repository, recorded in provenance.")
    ] = "github:flashinfer-ai/flashinfer-bench",
    registry: RegistryOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write a FlashInfer Trace dataset as definitions/<family>/<name>/ folders and definitions/catalogue.json.

    Then `kictl definitions compile` stores their records. A folder of the same name that the
    catalogue did not write (a hand-written definition) is kept as it is; definitions without
    workloads get the generated suite (docs/importing.md). Exit 2 when DATASET is no dataset.
    """
    target = open_registry(registry)
    report = write_catalogue(dataset, target.root, source=source, commit=commit)
    if as_json:
        emit_json({"source": report.source, "commit": report.commit, "definitions": report.entries})
    else:
        for name, entry in sorted(report.entries.items()):
            out(f"{entry['status']:<13}  {name}")
    counts = ", ".join(f"{report.count(status)} {status}" for status in ("imported", "hand-written", "unrepresented"))
    err(f"{len(report.entries)} definition(s) in {dataset}: {counts}; now run `kictl definitions compile`")

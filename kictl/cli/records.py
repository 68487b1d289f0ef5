"""Commands on records: ``init``, ``digest``, ``add``, ``validate``, ``show``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from kictl import canon
from kictl.advisories.published import deletion_failures
from kictl.cli._common import (
    REFERENCE_HELP,
    JsonOption,
    RegistryOption,
    emit_json,
    err,
    guarded,
    open_registry,
    out,
    short,
)
from kictl.cli.trust import attestation_lines
from kictl.derived import run_figures_lines
from kictl.errors import RecordError
from kictl.records import KINDS, BenchmarkRunSpec
from kictl.render import with_advisories
from kictl.scaffold import create_registry
from kictl.standing import record_level, record_marks
from kictl.store.inputs import read_record_inputs
from kictl.terminal import json_safe
from kictl.trust import check_record, resolve_digest
from kictl.validate import validate_registry

FilesArgument = Annotated[
    list[Path],
    typer.Argument(
        help="Files with one record, a JSON list of records, or a manifest {name: record}; '-' reads stdin; "
        "a folder gives every *.json below it.",
        show_default=False,
    ),
]


def _read(files: list[Path]) -> list[Any]:
    stdin = sys.stdin.buffer.read() if any(str(path) == "-" for path in files) else None
    return read_record_inputs(files, stdin=stdin)


@guarded
def init(
    directory: Annotated[Path, typer.Argument(help="Folder for the new registry (created if missing).")],
    permalink_base: Annotated[
        str,
        typer.Option(
            "--permalink-base",
            metavar="URL",
            help="Where the registry's record pages will be published (a digest is appended: "
            "https://example.org/r/). Default none: `kictl cite` gives the digest and the registry's location.",
        ),
    ] = "",
) -> None:
    """Create a new, empty registry: a git repository with a trust root and a policy."""

    sha = create_registry(directory, permalink_base=permalink_base)
    err(f"created an empty registry in {directory} (commit {sha[:12]})")
    out(str(directory.resolve()))


@guarded
def digest(files: FilesArgument, as_json: JsonOption = False) -> None:
    """Print the digest, kind and name of each record in FILES."""
    records = _read(files)
    if as_json:
        emit_json([{"digest": r.digest, "kind": r.kind, "name": r.name} for r in records])
        return
    for record in records:
        out(f"{record.digest}  {record.kind:<20}  {record.name}")


@guarded
def add(files: FilesArgument, registry: RegistryOption = None, as_json: JsonOption = False) -> None:
    """Validate records and store them in the registry; nothing is written if any is invalid.

    Records may arrive in any order: one whose references are not in the
    registry yet is stored with a warning (`kictl validate` reports what is
    still dangling).
    """
    target = open_registry(registry)
    records = _read(files)
    results = target.add(records)
    for result in results:
        for dangling in result.dangling:
            err(f"warning: {result.record.digest} ({result.record.kind}) refers to {dangling}, not in the registry yet")
    if as_json:
        emit_json(
            [
                {
                    "digest": r.record.digest,
                    "kind": r.record.kind,
                    "name": r.record.name,
                    "path": target.relative(r.path),
                    "created": r.created,
                    "dangling": list(r.dangling),
                }
                for r in results
            ]
        )
    else:
        for result in results:
            state = "added" if result.created else "present"
            out(f"{result.record.digest}  {result.record.kind:<20}  {state}")
    created = sum(1 for r in results if r.created)
    err(f"{created} added, {len(results) - created} already present")


@guarded
def validate(registry: RegistryOption = None, as_json: JsonOption = False) -> None:
    """Check every record, blob, attestation and definition folder of the registry.

    Each problem is printed as `path: message`. Exit 3 if there is any.
    """
    target = open_registry(registry)

    report = validate_registry(target)
    if as_json:
        emit_json(report.to_json())
    else:
        for problem in report.problems:
            out(str(problem))

    summary = ", ".join(f"{report.counts.get(kind, 0)} {kind}" for kind in KINDS)
    err(f"{summary}; {report.counts.get('blobs', 0)} blobs, {report.counts.get('attestations', 0)} attestations")
    for note in report.notes:
        err(f"note: {note}")
    if not report.ok:
        raise RecordError(f"{len(report.problems)} problem(s) in {target.root}")


@guarded
def show(
    reference: Annotated[str, typer.Argument(help=f"The record: {REFERENCE_HELP}.")],
    registry: RegistryOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print a record found by digest, digest prefix or name, with its evidence level and attestations."""

    target = open_registry(registry)
    digest = resolve_digest(target, reference)
    record = target.load(digest)
    path = target.relative(target.record_path(record.kind, digest))

    report = check_record(target, digest, registry_failures=deletion_failures)
    marks = record_marks(target, digest)

    spec = record.model.spec
    if as_json:
        emit_json(
            {
                "digest": record.digest,
                "kind": record.kind,
                "name": record.name,
                "path": path,
                "evidence": report.trust.to_json(),
                "advisories": marks.run_json(digest),
                "attestations": [result.to_json() for result in report.attestations],
                "failures": report.failures,
                "record": record.raw,
            }
        )
        return
    out(f"digest: {record.digest}")
    out(f"kind:   {record.kind}")
    out(f"name:   {record.name}")
    out(f"path:   {path}")
    trust = report.trust
    extras = [f"{trust.community_reruns} community rerun(s)", f"{trust.reviews} review(s)"]
    if trust.retracted:
        extras.insert(0, "RETRACTED")
    level = record_level(trust.level, record)  # no kept samples: reported at best
    out(f"evidence: {with_advisories(level, marks.of(digest))} · " + " · ".join(extras))
    for line in run_figures_lines(spec) if isinstance(spec, BenchmarkRunSpec) else []:
        out(line)  # kictl.derived: the figures every reader uses, and what the record contradicts
    if report.attestations:
        out(f"attestations ({len(report.attestations)}):")
        for line in attestation_lines(report.attestations, target.root):
            out(line)
    else:
        out("attestations: none")
    if report.failures:
        err(f"warning: {len(report.failures)} verification failure(s); run `kictl verify {short(digest)}`")
    sys.stdout.write(json_safe(canon.pretty_bytes(record.raw).decode("utf-8")))


def register(app: typer.Typer) -> None:
    app.command()(init)
    app.command()(digest)
    app.command()(add)
    app.command()(validate)
    app.command()(show)

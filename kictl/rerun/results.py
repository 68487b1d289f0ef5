"""A rerun's unsigned results on disk: the folder ``kictl rerun --out`` writes and ``kictl attest rerun`` reads.

The folder holds two files:

* ``reruns.json``: a ``RerunResults`` document, one entry per original run:
  the original's digest, the rerun's BenchmarkRun digest, the verdict and the
  numbers behind it (ratio, statistic, both latencies, tolerance, spreads),
  the device product it ran on, whether it was forced, and the salt of the
  correctness rounds' fresh seeds; and the body of the rerun request the
  reruns were made for (``kictl.rerun.request``).
* ``records.json``: a manifest ``{"<kind>/<hex>": record}`` of the records the
  reruns made (BenchmarkRuns, BenchmarkProtocols, ExecutionEnvironments);
  ``kictl add`` reads it too.

Both are written atomically in the normal form of registry files.  Nothing
here is signed: the machine that ran submitted code holds no key (DESIGN §10),
and whoever signs checks everything again (``kictl.rerun.attest``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, ValidationError

from kictl import canon
from kictl.errors import RecordError, RegistryError, UsageError
from kictl.records import (
    Digest,
    NonNegativeInt,
    Statistic,
    StoredRecord,
    Timestamp,
    WireModel,
    record_from_value,
    records_in_document,
)
from kictl.rerun.request import RequestBody
from kictl.store.files import write_atomic
from kictl.trust.models import HeldOutCheck

RESULTS_FILE = "reruns.json"
RECORDS_FILE = "records.json"
RESULTS_KIND = "RerunResults"

Salt = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{32}$")]


class RerunResult(WireModel):
    """One original run, rerun here, and what the rerun found."""

    original: Digest
    rerun: Digest | None = None
    verdict: Literal["agrees", "disagrees", "failed", "inconclusive"]
    reason: Annotated[str, StringConstraints(max_length=4096)]
    ratio: Annotated[float, Field(gt=0.0)] | None = None
    statistic: Statistic
    original_ns: NonNegativeInt
    rerun_ns: NonNegativeInt | None = None
    tolerance: Annotated[float, Field(ge=0.0)]
    rerun_spread: Annotated[float, Field(ge=0.0)] | None = None
    original_spread: Annotated[float, Field(ge=0.0)] | None = None
    status: str | None = None
    product: str
    forced: bool = False
    refusals: tuple[str, ...] = ()
    seed_salt: Salt | None = None
    held_out: HeldOutCheck | None = None  # issue 32: correctness on held-out shapes (kictl.rerun.heldout)


class RerunResults(WireModel):
    """The document ``reruns.json`` holds."""

    api_version: Literal["kernelindex.dev/v1alpha1"] = "kernelindex.dev/v1alpha1"
    kind: Literal["RerunResults"] = "RerunResults"
    kictl_version: str
    created_at: Timestamp
    results: tuple[RerunResult, ...]
    #: the request the reruns were made for (``kictl.rerun.request``): without it nothing can be signed
    request: RequestBody | None = None


def write_results(folder: Path, results: RerunResults, records: list[StoredRecord]) -> tuple[Path, Path]:
    """Write ``reruns.json`` and ``records.json`` into ``folder``; raises ``RegistryError``/``UsageError``."""
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--out {folder}: not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RegistryError(f"cannot create {folder}: {exc.strerror}") from exc
    manifest: dict[str, Any] = {}
    for record in records:
        manifest.setdefault(f"{record.kind}/{canon.digest_hex(record.digest)}", record.raw)
    records_path = folder / RECORDS_FILE
    results_path = folder / RESULTS_FILE
    write_atomic(records_path, canon.pretty_bytes(manifest))
    write_atomic(results_path, canon.pretty_bytes(results.model_dump(mode="json", by_alias=True, exclude_none=True)))
    return results_path, records_path


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError as exc:
        raise UsageError(f"{path}: no such file; is {path.parent} a folder written by `kictl rerun --out`?") from exc
    except OSError as exc:
        raise RegistryError(f"{path}: cannot read: {exc.strerror}") from exc


def read_results(folder: Path) -> tuple[RerunResults, dict[str, StoredRecord]]:
    """The results and the records (by digest) of a folder ``kictl rerun --out`` wrote.

    Every record's digest is recomputed and must be the one its manifest key
    names.  Raises ``UsageError`` for a folder without the files,
    ``RecordError`` for anything malformed or a digest that does not match.
    """
    results_path = folder / RESULTS_FILE
    value = canon.parse_json(_read(results_path), source=str(results_path))
    try:
        results = RerunResults.model_validate_json(json.dumps(value, allow_nan=False))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = canon.format_path(tuple(first["loc"]))
        raise RecordError(f"{results_path}: {where}: {first['msg']}") from exc
    records_path = folder / RECORDS_FILE
    manifest = canon.parse_json(_read(records_path), source=str(records_path))
    records: dict[str, StoredRecord] = {}
    if manifest != {}:
        for label, raw in records_in_document(manifest, source=str(records_path)):
            record = record_from_value(raw, source=label)
            key = label.rsplit("#", 1)[-1]
            expected = f"{record.kind}/{canon.digest_hex(record.digest)}"
            if key != expected:
                raise RecordError(f"{label}: the record's digest is {record.digest}; its manifest key says {key}")
            records[record.digest] = record
    return results, records

"""The entry points: ``read_dataset`` (records and a report, nothing written) and ``import_flashinfer_bench``
(stored in one transaction), and the sweep of temporary files a killed writer left.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

from kictl.errors import KictlError, UsageError
from kictl.importers.flashinfer_bench.model import (
    DEFAULT_LIMITS,
    STALE_TEMPORARY_S,
    Dataset,
    ImportReport,
    Limits,
    Outcome,
)
from kictl.importers.flashinfer_bench.sources import SOURCES_FILE, read_sources
from kictl.importers.flashinfer_bench.traces import _Reader
from kictl.layout import ATTESTATIONS_DIR, BLOBS_DIR, RECORDS_DIR
from kictl.records import (
    KINDS,
    StoredRecord,
)
from kictl.store.files import Transaction
from kictl.store.registry import Registry


def read_dataset(
    root: Path,
    *,
    limits: Limits = DEFAULT_LIMITS,
    taken_names: Mapping[str, list[StoredRecord]] | None = None,
) -> Dataset:
    """Read a FlashInfer Trace dataset folder into records, without touching any registry.

    ``taken_names`` maps Definition names to the Definitions a registry
    already gives them; a definition of one of those names whose digest is
    none of theirs is skipped (see ``import_flashinfer_bench``).  Items that cannot be imported
    are listed in ``Dataset.skipped``; nothing is raised for bad content.
    Raises ``UsageError`` when ``root`` is not a folder holding
    ``definitions/``, ``solutions/``, ``workloads/`` or ``traces/``.
    """
    if not root.is_dir():
        raise UsageError(f"{root}: no such folder (expected a FlashInfer Trace dataset)")
    folders = ("definitions", "solutions", "workloads", "traces")
    if not any((root / folder).is_dir() for folder in folders):
        raise UsageError(f"{root} is not a FlashInfer Trace dataset (it has none of {', '.join(folders)}/)")
    reader = _Reader(root, limits, taken_names or {})
    reader.read()
    return reader.dataset


def import_flashinfer_bench(
    registry: Registry,
    root: Path,
    *,
    dry_run: bool = False,
    allow_redefinition: bool = False,
    limits: Limits = DEFAULT_LIMITS,
) -> ImportReport:
    """Import the dataset at ``root`` into ``registry``; all records in one transaction.

    With ``dry_run`` nothing is written and the report says which records and
    blobs would be new.  Skipped items are reported, not raised (the CLI turns
    them into exit 1).  A dataset definition whose name the registry already
    gives to a Definition with another digest is skipped, and so is what
    depends on it, unless ``allow_redefinition`` (then it is stored as another
    Definition of that name).  Temporary files that a killed writer left in
    the registry are removed first (``sweep_stale_temporaries``).  Raises
    ``UsageError`` for a folder that is no dataset and ``RegistryError`` when
    the registry cannot be written (then nothing of this import is left behind).
    """
    taken = {} if allow_redefinition else registry_definitions(registry)
    sources = read_sources(root)
    if sources is not None and sources.explain_all:
        # an export of kictl's: its own records explain every document, so they come back as they were
        dataset = Dataset(root=root, records=dict(sources.records))
        dataset.notes.append(f"{SOURCES_FILE}: {len(sources.records)} record(s) of the export taken back verbatim")
    else:
        dataset = read_dataset(root, limits=limits, taken_names=taken)
        if sources is not None:
            dataset.notes.append(
                f"{SOURCES_FILE} set aside ({sources.unexplained[0]}"
                + (f"; {len(sources.unexplained) - 1} more" if len(sources.unexplained) > 1 else "")
                + "): imported as FlashInfer Trace data"
            )
    records = sorted(dataset.records.values(), key=lambda record: KINDS.index(record.kind))
    blob_new = {digest: not registry.blob_path(digest).is_file() for digest in dataset.blobs}
    if dry_run:
        new = {record.digest: not registry.record_path(record.kind, record.digest).is_file() for record in records}
    else:
        swept, young = sweep_stale_temporaries(registry)
        if swept:
            dataset.notes.append(f"removed {len(swept)} temporary file(s) left in the registry by an interrupted write")
        if young:
            dataset.notes.append(
                f"{len(young)} temporary file(s) in the registry are younger than {STALE_TEMPORARY_S:.0f} s and "
                "were left in place (another kictl may be writing); `kictl validate` reports them until a "
                "later import removes them"
            )
        # A record whose digest the registry already holds is present, whatever its metadata: the bundled
        # catalogue's records carry provenance labels the importer's do not, and a published file is never
        # rewritten (its metadata is presentation, not identity).
        stored = {record.digest for record in records if _holds(registry, record)}
        with Transaction() as transaction:
            for data in dataset.blobs.values():
                registry.add_blob(data, transaction=transaction)
            results = registry.add([r for r in records if r.digest not in stored], transaction=transaction)
        new = {result.record.digest: result.created for result in results}
        new.update(dict.fromkeys(stored, False))
    return ImportReport(
        source=root,
        registry=registry.root,
        dry_run=dry_run,
        outcomes=[Outcome(record=record, new=new[record.digest]) for record in records],
        skipped=dataset.skipped,
        notes=dataset.notes,
        missing_blobs=dataset.missing_blobs,
        definitions_without_workloads=dataset.definitions_without_workloads,
        blobs_new=sum(blob_new.values()),
        blobs_present=len(blob_new) - sum(blob_new.values()),
    )


def _holds(registry: Registry, record: StoredRecord) -> bool:
    """The registry's file for ``record``'s digest is a valid record of that digest (its metadata may differ).

    Anything else at that path (other bytes, another record) is left to ``Registry.add``, which refuses it.
    """
    path = registry.record_path(record.kind, record.digest)
    if not path.is_file():
        return False
    try:
        held = registry.read_record(path)
    except KictlError:
        return False
    return held.digest == record.digest and held.kind == record.kind and held.raw["spec"] == record.raw["spec"]


def registry_definitions(registry: Registry) -> dict[str, list[StoredRecord]]:
    """Definition name -> the Definitions of that name in ``registry`` (more than one after a redefinition).

    A record file that cannot be read is passed over here; ``kictl validate``
    is the command that reports it.
    """
    names: dict[str, list[StoredRecord]] = {}
    for _, path in registry.record_files(["Definition"]):
        try:
            record = registry.read_record(path)
        except KictlError:
            continue
        names.setdefault(record.name, []).append(record)
    return names


def sweep_stale_temporaries(
    registry: Registry, *, older_than: float = STALE_TEMPORARY_S
) -> tuple[list[Path], list[Path]]:
    """Remove the store's temporary files (``.<name>.<random>.tmp``) that a killed writer left behind.

    ``kictl.store.files.write_atomic`` writes a temporary file beside its target
    and renames it; ``kill -9`` between the two leaves the temporary file, and
    ``kictl validate`` then refuses the registry.  Only files under
    ``registry/records/``, ``registry/blobs/`` and ``registry/attestations/``
    with that name pattern are considered; those last modified more than
    ``older_than`` seconds ago are removed (a live write renames its file
    within moments), younger ones are left in place.  Returns ``(removed,
    left in place)``.
    """
    removed: list[Path] = []
    young: list[Path] = []
    now = time.time()
    for folder in (RECORDS_DIR, BLOBS_DIR, ATTESTATIONS_DIR):
        top = registry.root / folder
        for dirpath, _, filenames in os.walk(top):
            for name in filenames:
                if not (name.startswith(".") and name.endswith(".tmp")):
                    continue
                path = Path(dirpath) / name
                try:
                    info = path.lstat()
                    if now - info.st_mtime < older_than:
                        young.append(path)
                        continue
                    path.unlink()
                except OSError:
                    continue
                removed.append(path)
    return removed, young

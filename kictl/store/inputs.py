"""Reading the JSON files and record manifests a command is given (a path, or ``-`` for stdin)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kictl import canon
from kictl.errors import RecordError, UsageError
from kictl.records import StoredRecord, record_from_value, records_in_document
from kictl.store.files import read_file

if TYPE_CHECKING:
    pass


# --------------------------------------------------------------------------- inputs


def parse_json_file(path: Path, *, source: str | None = None) -> Any:
    """Read and strictly parse a JSON file; raises ``RegistryError`` or ``RecordError``."""
    return canon.parse_json(read_file(path, source), source=source or str(path))


def read_record_inputs(paths: Sequence[Path], *, stdin: bytes | None = None) -> list[StoredRecord]:
    """Records from files given on the command line.

    Each file holds one record, a JSON list of records or a manifest; a folder
    contributes every ``*.json`` below it; ``-`` is standard input (``stdin``).
    Every record is validated before any is returned: the error lists every
    problem (``RecordError``), or names the unreadable file (``RegistryError``).
    """
    documents: list[tuple[str, bytes]] = []
    for path in paths:
        if str(path) == "-":
            documents.append(("<stdin>", stdin if stdin is not None else b""))
        elif path.is_dir():
            for child in sorted(path.rglob("*.json")):
                documents.append((str(child), _read_input(child)))
        else:
            documents.append((str(path), _read_input(path)))
    problems: list[str] = []
    found: list[StoredRecord] = []
    for source, data in documents:
        try:
            value = canon.parse_json(data, source=source)
            for label, item in records_in_document(value, source=source):
                found.append(record_from_value(item, source=label))
        except RecordError as exc:
            problems.extend([exc.message, *exc.details])
    if problems:
        raise RecordError(problems[0], details=problems[1:])
    return found


def _read_input(path: Path) -> bytes:
    return read_file(path, missing=UsageError)

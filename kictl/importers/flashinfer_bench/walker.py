"""Walking a dataset folder: only files inside it, under the size caps, one line at a time; a failure skips
the item and is reported as ``file:line: message``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kictl.errors import RecordError
from kictl.importers.flashinfer_bench.model import _FOLDER_KINDS, Dataset, Limits, Skipped
from kictl.importers.flashinfer_bench.values import _decode, _load_json, _object, _Skip, _string, _unexpected
from kictl.records import (
    StoredRecord,
)


@dataclass
class _Line:
    file: str
    number: int
    value: dict[str, Any]
    definition: str


class _Walker:
    """The files and lines of one dataset folder; ``dataset`` holds what was read and skipped."""

    def __init__(self, root: Path, limits: Limits) -> None:
        self.root = root
        self.real_root = root.resolve()
        self.limits = limits
        self.dataset = Dataset(root=root)

    def _files(self, folder: str, pattern: str) -> list[Path]:
        """The documents of one top folder, sorted; symlinks are followed only inside the dataset.

        A symlinked file or folder whose target lies outside the dataset is
        reported as skipped and never read; a symlinked folder inside it is
        not descended into (what it points to is read where it lies).
        Anything that is not a regular file (a FIFO, a device) is skipped.
        """
        suffix = pattern.removeprefix("*")
        kind = _FOLDER_KINDS[folder]
        base = self.root / folder
        if base.is_symlink() and not self._inside(base):
            self._skip_path(base, kind, "a symlink that leads outside the dataset; not read")
            return []
        if not base.is_dir():
            return []
        found: list[Path] = []
        for dirpath, dirnames, filenames in os.walk(base):
            here = Path(dirpath)
            for name in sorted(dirnames):
                path = here / name
                if path.is_symlink():
                    if self._inside(path):
                        self.dataset.notes.append(f"{self._relative(path)}: a symlinked folder; not followed")
                    else:
                        self._skip_path(path, kind, "a symlinked folder that leads outside the dataset; not read")
            for name in filenames:
                if not name.endswith(suffix):
                    continue
                path = here / name
                if path.is_symlink() and not self._inside(path):
                    self._skip_path(path, kind, "a symlink that leads outside the dataset; not read")
                elif not path.is_file():
                    self._skip_path(path, kind, "not a regular file; not read")
                else:
                    found.append(path)
        return sorted(found)

    def _inside(self, path: Path) -> bool:
        """Whether ``path``, every symlink in it resolved, lies inside the dataset."""
        try:
            return path.resolve().is_relative_to(self.real_root)
        except (OSError, RuntimeError):  # a symlink loop
            return False

    def _skip_path(self, path: Path, kind: str, message: str) -> None:
        self.dataset.skipped.append(Skipped(self._relative(path), None, kind, message))

    def _relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def _guard(self, path: Path, kind: str, action: Callable[[Path], None]) -> None:
        """Read one document; a failure skips it and is reported as ``file: message``."""
        try:
            action(path)
        except _Skip as exc:
            self.dataset.skipped.append(Skipped(self._relative(path), None, kind, str(exc)))
        except RecordError as exc:  # text JCS cannot hold (lone surrogates), found while hashing
            self.dataset.skipped.append(Skipped(self._relative(path), None, kind, exc.message))
        except (RecursionError, OverflowError, ValueError) as exc:  # no item may stop the import
            self.dataset.skipped.append(Skipped(self._relative(path), None, kind, _unexpected(exc)))

    def _guard_line(self, line: _Line, kind: str, action: Callable[[_Line], None]) -> None:
        """Read one line; a failure skips it and is reported as ``file:line: message``."""
        try:
            action(line)
        except _Skip as exc:
            self.dataset.skipped.append(Skipped(line.file, line.number, kind, str(exc)))
        except RecordError as exc:  # text JCS cannot hold (lone surrogates), found while hashing
            self.dataset.skipped.append(Skipped(line.file, line.number, kind, exc.message))
        except (RecursionError, OverflowError, ValueError) as exc:  # no item may stop the import
            self.dataset.skipped.append(Skipped(line.file, line.number, kind, _unexpected(exc)))

    def _read_text(self, path: Path) -> str:
        """A whole document (a definition or a solution), at most ``limits.document_bytes``."""
        limit = self.limits.document_bytes
        try:
            with path.resolve().open("rb") as handle:  # resolved: checked to lie inside by _files
                data = handle.read(limit + 1)
        except OSError as exc:
            raise _Skip(f"cannot read: {exc.strerror}") from exc
        if len(data) > limit:
            raise _Skip(f"the file is over the limit of {limit} bytes; not read")
        return _decode(data)

    def _add(self, record: StoredRecord) -> StoredRecord:
        self.dataset.records.setdefault(record.digest, record)
        return record

    def _lines(self, path: Path) -> Iterator[_Line]:
        label = self._relative(path)
        for number, raw in self._raw_lines(path, label):
            if isinstance(raw, _Skip):
                self.dataset.skipped.append(Skipped(label, number, self._kind_of_line(label, ""), str(raw)))
                continue
            if not raw.strip():
                continue
            try:
                value = _object(_load_json(raw, self.limits.depth))
                definition = _string(value.get("definition"), "definition")
                _object(value.get("workload"), "workload")
            except _Skip as exc:
                self.dataset.skipped.append(Skipped(label, number, self._kind_of_line(label, raw), str(exc)))
                continue
            yield _Line(label, number, value, definition)

    def _raw_lines(self, path: Path, label: str) -> Iterator[tuple[int, str | _Skip]]:
        """``(number, text)`` of each line, read one at a time; a line over the cap or not UTF-8 is a ``_Skip``."""
        limit = self.limits.line_bytes
        try:
            handle = path.resolve().open("rb")  # resolved: checked to lie inside by _files
        except OSError as exc:
            self.dataset.skipped.append(Skipped(label, None, self._kind_of_file(label), f"cannot read: {exc.strerror}"))
            return
        with handle:
            number = 0
            while True:
                try:
                    data = handle.readline(limit + 1)
                    if not data:
                        return
                    number += 1
                    if len(data) > limit and not data.endswith(b"\n"):
                        while data and not data.endswith(b"\n"):  # pass over the rest of the line
                            data = handle.readline(1024 * 1024)
                        yield number, _Skip(f"the line is over the limit of {limit} bytes; not read")
                        continue
                except OSError as exc:
                    self.dataset.skipped.append(
                        Skipped(label, number or None, self._kind_of_file(label), f"cannot read: {exc.strerror}")
                    )
                    return
                try:
                    yield number, _decode(data.rstrip(b"\r\n"))
                except _Skip as exc:
                    yield number, exc

    @staticmethod
    def _kind_of_file(label: str) -> str:
        return "Workload" if label.startswith("workloads/") or "/workloads/" in label else "BenchmarkRun"

    def _kind_of_line(self, label: str, raw: str) -> str:
        """What a line that does not parse was meant to be, for the counts."""
        if self._kind_of_file(label) == "Workload":
            return "Workload"
        return "Workload" if re.search(r'"evaluation"\s*:\s*(?:null|\{\s*\})', raw) else "BenchmarkRun"

    @staticmethod
    def _evaluated(value: dict[str, Any]) -> bool:
        evaluation = value.get("evaluation")
        return evaluation is not None and evaluation != {}

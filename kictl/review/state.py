"""The state of one review while it runs: the files read at head, the records known, the findings so
far.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from kictl import canon, layout
from kictl.errors import RecordError
from kictl.layout import (
    DEFINITIONS_DIR,
)
from kictl.records import (
    StoredRecord,
    record_from_bytes,
)
from kictl.review._common import _DEFINITION_FILES, HINTS, LINTS
from kictl.review.model import Checks, Finding
from kictl.review.report import ReviewReport
from kictl.review.revision import read_paths
from kictl.store.registry import Registry
from kictl.validate import Problem

_area = layout.area


_READ = frozenset({"record", "blob", "attestation", "root", "trust", "policy"})
_PUBLISHED = {"record": "record", "blob": "blob", "attestation": "attestation", "trust": "trust-root version"}


def _definition_folder(path: str) -> str | None:
    """``definitions/<family>/<name>`` for a file of a definition folder, else ``None``."""
    parts = path.split("/")
    if len(parts) == 4 and parts[0] == DEFINITIONS_DIR and parts[3] in _DEFINITION_FILES:
        return "/".join(parts[:3])
    return None


# --------------------------------------------------------------------------- the review's state


class _ReviewBase:
    """The state of one review while it runs: what was read, what was found (``_Review`` runs it)."""

    def __init__(self, registry: Registry, report: ReviewReport, checks: Checks) -> None:
        self.registry = registry
        self.git = registry.git
        self.report = report
        self.checks = checks
        self.head_bytes: dict[str, bytes] = {}
        self.known: dict[str, str] = {}  # digest -> kind, base and head together
        self.head_paths: dict[str, str] = {}  # digest -> path of the record at head
        self.new_records: list[tuple[str, StoredRecord]] = []
        self.new_envelopes: dict[str, list[str]] = {}  # subject digest -> envelope paths
        self.loaded: dict[str, StoredRecord | None] = {}

    # ----------------------------------------------------------------- findings

    def lint(self, code: str, message: str, path: str | None = None, group: str | None = None) -> None:
        assert code in LINTS, code
        self.report.lints.append(Finding(code, message, path, group))

    def hint(self, code: str, message: str, path: str | None = None, group: str | None = None) -> None:
        assert code in HINTS, code
        self.report.hints.append(Finding(code, message, path, group))

    def problems(self, problems: Iterable[Problem], code: str) -> None:
        for problem in problems:
            self.lint(code, problem.message, problem.path)

    def signing_bound(self) -> datetime:
        """The signing time of every envelope the PR adds (docs/review.md "Signing time").

        The committer time of the base's tip, never later than now: the
        envelope cannot reach the main line before that, and the PR's own
        commit dates are the author's to choose.
        """
        tip = datetime.fromtimestamp(self.git.committer_time(self.report.base), UTC)
        return min(tip, datetime.now(UTC).replace(microsecond=0))

    # ----------------------------------------------------------------- records at head

    def record(self, digest: str) -> StoredRecord | None:
        """A record of base or head by digest (head's bytes), parsed once; ``None`` when absent or invalid."""
        if digest in self.loaded:
            return self.loaded[digest]
        path = self.head_paths.get(digest)
        found: StoredRecord | None = None
        if path is not None:
            data = self.head_bytes.get(path)
            if data is None:
                data = read_paths(self.git, self.report.head, [path]).get(path)
            if data is not None:
                try:
                    found = record_from_bytes(data, source=path)
                except RecordError:
                    found = None
        self.loaded[digest] = found
        return found

    def preload(self, digests: Iterable[str]) -> None:
        """Read the head's files of these records in one pass per folder."""
        paths = [self.head_paths[d] for d in digests if d not in self.loaded and d in self.head_paths]
        paths = [path for path in paths if path not in self.head_bytes]
        self.head_bytes.update(read_paths(self.git, self.report.head, paths))

    def read_blob(self, digest: str) -> bytes:
        path = layout.blob_path(canon.digest_hex(digest))
        data = self.head_bytes.get(path)
        if data is None:
            data = self.git.read_file(self.report.head, path)
        if data is None:
            raise LookupError(f"no blob {digest}")
        return data

"""``review()``: one review of a PR branch, its steps in order (docs/review.md)."""

from __future__ import annotations

import posixpath

from kictl import canon
from kictl.advisories.review import advised_new_runs, open_advisories_at, review_advisories
from kictl.errors import RecordError
from kictl.keyscan import scan_bytes
from kictl.layout import (
    ADVISORIES_DIR,
    BLOBS_DIR,
    DEFINITIONS_DIR,
    RECORDS_DIR,
    ROOT_FILE,
)
from kictl.policy import Policy
from kictl.records import (
    BenchmarkRun,
    StoredRecord,
)
from kictl.review._common import _CONTROL, _DEFINITION_FILES
from kictl.review.files import _FileChecks
from kictl.review.model import Checks
from kictl.review.names import _NameChecks
from kictl.review.report import ReviewReport
from kictl.review.revision import read_paths, record_path_digest
from kictl.review.runs import _RunChecks
from kictl.review.seams import default_checks
from kictl.review.state import _PUBLISHED, _READ, _area, _definition_folder
from kictl.store.git import Change
from kictl.store.registry import Registry
from kictl.trust.readers import policy_at
from kictl.validate import check_references

_REGULAR = "100644"
_MODES = {"120000": "a symbolic link", "160000": "a gitlink, a submodule", "100755": "an executable file"}


def _utf8(path: str) -> bool:
    """git reports a non-UTF-8 name with surrogate escapes; such a name is never a registry path."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _displayable(changes: list[Change]) -> tuple[list[Change], set[str]]:
    """Non-UTF-8 names with their bytes escaped (``\\xff``), so every output can print them."""
    shown, odd = [], set()
    for change in changes:
        if _utf8(change.path):
            shown.append(change)
            continue
        text = change.path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        shown.append(Change(status=change.status, path=text, mode=change.mode))
        odd.add(text)
    return shown, odd


class _Review(_FileChecks, _RunChecks, _NameChecks):
    """One review, in its steps; ``review`` is its entry point."""

    def run(self, policy: Policy | None) -> None:
        report = self.report
        areas = {change.path: _area(change.path) for change in report.changes}
        if report.changes and all(area == "outside" for area in areas.values()):
            report.code_only = True
            return
        if not report.changes:
            return
        wanted = [
            change.path
            for change in report.changes
            if change.status != "D" and areas[change.path] in _READ and change.path not in report.odd_names
        ]
        self.head_bytes = read_paths(self.git, report.head, wanted)
        others = [
            change.path
            for change in report.changes
            if change.status != "D" and change.path not in report.odd_names and change.path not in self.head_bytes
        ]  # definition sources, files outside the layout: read only to look for keys
        for path, data in {**self.head_bytes, **read_paths(self.git, report.head, others)}.items():
            for finding in scan_bytes(data, path):
                self.lint(
                    "private-key",
                    f"{finding.what} at line {finding.line}: a private key is never published; rotate it "
                    '(its holder has leaked it) and drop it from the branch (docs/trust.md "Key custody")',
                    path,
                )
        base_records = self.git.list_files(report.merge_base, RECORDS_DIR)
        head_records = self.git.list_files(report.head, RECORDS_DIR)
        for path in base_records:
            named = record_path_digest(path)
            if named is not None:
                self.known[named[1]] = named[0]
        for path in head_records:
            named = record_path_digest(path)
            if named is not None:
                self.known[named[1]] = named[0]
                self.head_paths[named[1]] = path
        blobs = {
            posixpath.basename(p)
            for rev in (report.merge_base, report.head)
            for p in self.git.list_files(rev, BLOBS_DIR)
        }
        if policy is None:
            policy = self._base_policy()

        folders: set[str] = set()
        advisory_changes: list[Change] = []  # registry/advisories/ (docs/advisories.md)
        root_change: Change | None = None
        trust_versions: list[str] = []  # added files under registry/trust/
        for change in report.changes:
            area = areas[change.path]
            if change.path in report.odd_names:
                self.lint("path-not-allowed", "a file name that is not UTF-8", change.path)
            elif _CONTROL.search(change.path):
                self.lint("path-not-allowed", "a file name with control characters", change.path)
            elif change.status != "D" and area != "outside" and change.mode != _REGULAR:
                self.lint(
                    "path-not-allowed",
                    f"not a regular file: git mode {change.mode} ({_MODES.get(change.mode, 'unknown')}); "
                    f"data files are mode {_REGULAR}",
                    change.path,
                )
            elif area == "advisory":
                advisory_changes.append(change)
            elif area == "outside":
                self.lint(
                    "path-not-allowed",
                    "outside registry/ and definitions/: a registry PR changes data only "
                    "(send code in a PR of its own)",
                    change.path,
                )
            elif area == "registry-other":
                self.lint(
                    "path-not-allowed",
                    "not a registry path (records/, blobs/, attestations/, trust/, policy.json)",
                    change.path,
                )
            elif area == "definition":
                folder = _definition_folder(change.path)
                if folder is None:
                    self.lint(
                        "path-not-allowed",
                        f"not a definition file ({DEFINITIONS_DIR}/<family>/<name>/{{{','.join(_DEFINITION_FILES)}}})",
                        change.path,
                    )
                else:
                    folders.add(folder)
            elif change.status != "D" and area in _READ and change.path not in self.head_bytes:
                self.lint("path-not-allowed", "not a regular file (a submodule?)", change.path)
            elif area in _PUBLISHED and change.status != "A":
                verb = "deletes" if change.status == "D" else "edits"
                self.lint(
                    "published-changed",
                    f"{verb} a published {_PUBLISHED[area]}: published files are never modified "
                    "(a correction is a new record; a retraction attestation with supersededBy withdraws the old)",
                    change.path,
                )
            elif area == "record":
                self._added_record(change.path)
            elif area == "blob":
                self._added_blob(change.path)
            elif area == "attestation":
                self._added_envelope(change.path)
            elif area == "root":
                root_change = change
            elif area == "trust":
                trust_versions.append(change.path)
            elif area == "policy":
                self._policy_change(change)
        self._trust_changes(root_change, trust_versions)
        if advisory_changes:
            self._advisories(advisory_changes)

        new = [record for _, record in self.new_records]
        for record in new:
            self.known[record.digest] = record.kind
        source_of = {record.digest: path for path, record in self.new_records}
        self.problems(check_references(new, self.known, source_of), "dangling-reference")
        for path, record in self.new_records:
            for input_name, digest in record.blob_references():
                if canon.digest_hex(digest) not in blobs:
                    self.lint(
                        "dangling-reference",
                        f"$.spec.inputs.{input_name}.digest: no blob {digest} in base or head",
                        path,
                    )
        for subject, paths in sorted(self.new_envelopes.items()):
            if subject not in self.known:
                for path in paths:
                    self.lint("dangling-reference", f"attests {subject}, which neither base nor head has", path)
        for folder in sorted(folders):
            self._definition_folder(folder)
        self._names(self.new_records)

        runs = [(path, record) for path, record in self.new_records if isinstance(record.model, BenchmarkRun)]
        self._consistency(runs)
        self._derived_figures(runs)
        self._floors(runs)
        verdicts = self._signatures(runs)
        self._advised_runs(runs)
        self._source_native(runs, verdicts)
        self._leaderboards(policy, [record.digest for _, record in runs])

    def _advisories(self, changes: list[Change]) -> None:
        """Harness advisories, judged by the base's trust root (``kictl.advisories.review``)."""

        report = self.report
        added = [change.path for change in changes if change.status == "A" and change.path not in report.odd_names]
        head = read_paths(self.git, report.head, added)
        known = {path for rev in (report.merge_base, report.base) for path in self.git.list_files(rev, ADVISORIES_DIR)}
        root = read_paths(self.git, report.base, [ROOT_FILE]).get(ROOT_FILE)
        for code, message, path in review_advisories(changes, head, known, root, self.signing_bound()):
            self.lint(code, message, path)

    def _advised_runs(self, runs: list[tuple[str, StoredRecord]]) -> None:
        """A hint for each new run that an open advisory of the base marks (``kictl.advisories.review``)."""
        if not runs:
            return

        advisories = open_advisories_at(self.git, self.report.base)
        if not advisories:
            return
        found = []
        for path, record in runs:
            protocol = self.record(str(record.raw["spec"].get("protocolDigest")))
            spec = protocol.raw["spec"] if protocol is not None and protocol.kind == "BenchmarkProtocol" else None
            found.append((path, str(record.raw["spec"].get("status")), spec))
        for path, message in advised_new_runs(advisories, found):
            self.hint("advised-run", message, path)

    def _base_policy(self) -> Policy:
        """The base's policy by the rule every reader applies (``trust.readers.judge_policy``: the signed one)."""

        try:
            return policy_at(self.registry, self.report.base).policy
        except RecordError:
            return Policy()


def review(
    registry: Registry,
    base: str,
    head: str = "HEAD",
    *,
    checks: Checks | None = None,
    policy: Policy | None = None,
) -> ReviewReport:
    """Review the changes from the merge base of ``base`` and ``head`` to ``head`` (docs/review.md).

    ``policy`` defaults to the base's ``registry/policy.json``; ``checks`` to
    ``default_checks()``.  Raises ``NotFoundError`` (exit 3) for an unknown
    revision and ``RegistryError`` (exit 4) when the registry is no git
    repository or git fails; bad content becomes lints, never an error.
    """
    history = registry.git
    head_sha = history.rev_parse(head)
    base_sha = history.rev_parse(base)
    merge_base = history.merge_base(base_sha, head_sha)
    report = ReviewReport(
        base_ref=base,
        head_ref=head,
        base=base_sha,
        merge_base=merge_base,
        head=head_sha,
    )
    report.changes, report.odd_names = _displayable(history.changed_files(merge_base, head_sha))
    if checks is None:  # a retraction is judged by the record's original submitter at the head (docs/trust.md)
        checks = default_checks(registry, base_sha, head_sha)
    _Review(registry, report, checks).run(policy)
    report.lints.sort(key=lambda finding: (finding.path or "", finding.code, finding.message))
    return report

"""The review's checks of each changed file: records, blobs, envelopes, trust-root versions, the
policy, definitions.
"""

from __future__ import annotations

import posixpath
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kictl import canon, definitions, layout
from kictl.errors import CheckFailed, KictlError, RecordError
from kictl.layout import (
    ROOT_FILE,
)
from kictl.review.model import NotChecked
from kictl.review.report import _count
from kictl.review.revision import _policy_from_bytes, read_paths
from kictl.review.seams import _NO_TRUST
from kictl.review.state import _ReviewBase
from kictl.store.git import Change
from kictl.validate import check_blob_file, check_envelope_file, check_record_file


def _root_document(data: bytes) -> dict[str, Any]:
    try:
        value = canon.parse_json(data)
    except RecordError:
        return {}
    return value if isinstance(value, dict) else {}


def _root_version(data: bytes) -> object:
    """The ``signed.version`` a trust-root file claims (``None`` when it has none); never raises."""
    signed = _root_document(data).get("signed")
    return signed.get("version") if isinstance(signed, dict) else None


def _keyless(data: bytes) -> bool:
    signed = _root_document(data).get("signed")
    return isinstance(signed, dict) and not signed.get("keys")


class _FileChecks(_ReviewBase):
    """The checks of each added or changed file: records, blobs, envelopes, the trust root, the policy, definitions."""

    def _added_record(self, path: str) -> None:
        record, problems = check_record_file(path, self.head_bytes[path])
        for problem in problems:
            layout = problem.message.startswith("not a record path")
            code = "schema" if record is None and not layout else "bad-name-or-form"
            self.lint(code, problem.message, problem.path)
        if record is not None:
            self.new_records.append((path, record))
            self.loaded[record.digest] = record
            self.head_paths.setdefault(record.digest, path)
            counts = self.report.added_records
            counts[record.kind] = counts.get(record.kind, 0) + 1

    def _added_blob(self, path: str) -> None:
        self.report.added_blobs += 1
        self.problems(check_blob_file(path, self.head_bytes[path]), "bad-name-or-form")

    def _added_envelope(self, path: str) -> None:
        self.report.added_attestations += 1
        problems = check_envelope_file(path, self.head_bytes[path])
        self.problems(problems, "bad-name-or-form")
        parts = path.split("/")
        if len(parts) == 5 and canon.is_hex_digest(parts[3]):
            self.new_envelopes.setdefault(canon.DIGEST_PREFIX + parts[3], []).append(path)

    def _trust_changes(self, root: Change | None, added: Sequence[str]) -> None:
        """docs/trust.md: each new trust-root version follows the one before with the maintainer thresholds.

        The base's ``root.json`` is the previous version; the added
        ``registry/trust/<N>.root.json`` files, in order, must each pass
        ``verify_root_update`` (TUF §5.3.4-5), and the head's ``root.json``
        must be the newest of them byte for byte (``trust.root_chain`` keeps
        every version).  A version file equal to the base's root is the keyless
        root of ``kictl init`` kept as version 1.
        """
        if root is not None and root.status == "D":
            self.lint("published-changed", "deletes the trust root", root.path)
            return
        versions: dict[int, str] = {}
        for path in added:
            number = layout.parse_root_version_path(path)
            if number is None:
                self.lint("path-not-allowed", f"not a trust-root version ({layout.ROOT_VERSION_PATTERN})", path)
            else:
                versions[number] = path
        if root is None and not versions:
            return
        previous = read_paths(self.git, self.report.base, [ROOT_FILE]).get(ROOT_FILE)
        if previous is None:
            return  # a registry's first trust root has no previous version to be signed by
        verify = self.checks.verify_root_update
        if verify is None:
            self.report.not_checked.append(NotChecked("trust root", f"{_NO_TRUST}: the maintainer threshold"))
            return
        newest = self.head_bytes.get(ROOT_FILE, previous) if root is not None else previous
        current = previous
        for number in sorted(versions):
            path = versions[number]
            data = self.head_bytes.get(path)
            if data is None:
                continue  # linted: not a regular file
            claimed = _root_version(data)
            if data == current:
                if data == previous and claimed == number and _keyless(previous):
                    continue  # the keyless root of `kictl init` kept as its own version file
                self.lint(
                    "trust-root-threshold",
                    f"a byte copy of trust root version {claimed}, not a new version {number}",
                    path,
                )
                return
            if claimed != number:
                self.lint("trust-root-threshold", f"holds trust root version {claimed}, not {number}", path)
                return
            try:
                verify(current, data)
            except CheckFailed as exc:
                self.lint("trust-root-threshold", exc.message, path)
                return
            current = data
        if not versions:
            try:
                verify(previous, newest)
            except CheckFailed as exc:
                self.lint("trust-root-threshold", exc.message, ROOT_FILE)
                return
            self.lint(
                "trust-root-threshold",
                f"changes the trust root without keeping the new version as {layout.ROOT_VERSION_PATTERN} "
                "(`kictl trust` writes both)",
                ROOT_FILE,
            )
        elif newest != current:
            self.lint(
                "trust-root-threshold",
                f"{ROOT_FILE} is not byte for byte {posixpath.basename(versions[max(versions)])}, "
                "the newest trust-root version this PR adds",
                ROOT_FILE,
            )

    def _policy_signed(self, path: str) -> None:
        """docs/trust.md "The policy": the head's root names the new policy's digest, in a version this PR adds.

        The root change itself is judged by ``_trust_changes`` (the maintainer
        threshold of the base tip's root); here only the digest is matched.
        """
        digest = canon.bytes_digest(self.head_bytes[path])
        root = self.head_bytes.get(ROOT_FILE)  # present only when this PR changes root.json
        signed = _root_document(root).get("signed") if root is not None else None
        if not isinstance(signed, dict) or signed.get("policyDigest") != digest:
            self.lint(
                "policy-unsigned",
                f"changes the registry policy, but no trust-root version this PR adds signs it (policyDigest "
                f"{digest}); a maintainer runs `kictl trust sign-policy --key MAINTAINER_KEY`",
                path,
            )

    def _policy_change(self, change: Change) -> None:
        if change.status == "D":
            self.lint("published-changed", "deletes the registry policy", change.path)
            return
        try:
            _policy_from_bytes(self.head_bytes[change.path], change.path)
        except RecordError as exc:
            self.lint("schema", exc.at(change.path), change.path)
            return
        self._policy_signed(change.path)
        self.hint(
            "policy-changed",
            "changes the registry policy (staleness window, tolerances, baselines): a maintainer's decision; "
            "this review applies the base's policy",
            change.path,
        )

    # ----------------------------------------------------------------- definitions

    def _compile(self, rev: str, folder: str) -> definitions.Compiled | None:
        """Compile ``folder`` as it is at ``rev`` in a scratch copy; ``None`` when it has no definition.json.

        Raises ``RecordError`` when it does not compile.
        """
        files = list(self.git.read_files(rev, folder))
        names = {posixpath.basename(path) for path, _ in files}
        if definitions.DEFINITION_FILE not in names:
            if files:
                raise RecordError(f"{folder}: no {definitions.DEFINITION_FILE}")
            return None
        with tempfile.TemporaryDirectory(prefix="kictl-review-") as scratch:
            root = Path(scratch)
            for path, data in files:
                if posixpath.dirname(path) != folder:
                    continue
                target = root / path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            return definitions.compile_folder(root / folder, root)

    def _definition_folder(self, folder: str) -> None:
        try:
            compiled = self._compile(self.report.head, folder)
        except KictlError as exc:
            self.lint("schema", exc.at(folder), folder)
            return
        if compiled is None:
            return  # the folder is gone; its records stay published
        try:
            before = self._compile(self.report.merge_base, folder)
        except KictlError:
            before = None
        old = before.definition.digest if before else None
        head_has = set(self.head_paths)
        new = compiled.definition.digest
        missing = [record for record in compiled.workloads if record.digest not in head_has]
        parts = []
        if new not in head_has:
            parts.append(f"Definition {compiled.definition.name} to {new}")
        if missing:
            labels = ", ".join(record.name for record in missing[:5]) + (", ..." if len(missing) > 5 else "")
            parts.append(f"{_count(len(missing), 'Workload')} ({labels}) to records")
        if parts:
            what = " and ".join(parts)
            if before is None:
                self.lint(
                    "definition-not-compiled",
                    f"compiles {what} this PR does not add (run `kictl definitions compile` and commit them)",
                    folder,
                )
            else:
                kept = f"; the old Definition {old} stays published" if new != old else ""
                self.lint(
                    "definition-in-place",
                    f"changed in place: it compiles {what} this PR does not add; a changed definition is a new "
                    f"record (run `kictl definitions compile` and commit them){kept}",
                    folder,
                )
        if old is not None and old != new and new in head_has:
            self.hint(
                "definition-new-version",
                f"{compiled.definition.name} gets a new Definition {new} (was {old}); runs of the old one stay "
                "attached to it and are not compared with the new one",
                folder,
            )

"""``kictl review`` of a PR's advisory files (docs/review.md, docs/advisories.md): as strict as records.

Each added ``registry/advisories/<ID>/<N>.dsse.json`` must verify against the
*base's* trust root at the review's signing bound (a PR cannot bring the key
that signs it): a maintainer signature, a valid document in normal form, the
id and version of its path, and the next version of its id (1 for a new id,
else one more than the highest version at the base or earlier in the PR).  An
edited or deleted version file is a published file changed.  Everything else
under ``registry/advisories/`` is off the layout.  The review never raises
for bad content: each defect is a finding ``(code, message, path)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from kictl.advisories.document import Advisory, parse_advisory_path
from kictl.advisories.marks import marks_run
from kictl.advisories.published import Candidate, advisory_standing, verify_advisory
from kictl.errors import KictlError
from kictl.layout import ADVISORIES_DIR, ROOT_FILE
from kictl.store.git import Change
from kictl.trust import load_root

#: The lint of an advisory version that counts for nothing (``kictl.review``'s LINTS explains it).
LINT = "bad-advisory"


def review_advisories(
    changes: Iterable[Change],
    head_bytes: Mapping[str, bytes | None],
    base_paths: Iterable[str],
    base_root: bytes | None,
    signed_at: datetime,
) -> list[tuple[str, str, str]]:
    """Findings ``(lint code, message, path)`` for the advisory files a PR changes.

    ``base_paths`` are the files under ``registry/advisories/`` at the merge
    base; ``base_root`` the base tip's ``registry/trust/root.json``.
    """
    findings: list[tuple[str, str, str]] = []
    highest: dict[str, int] = {}
    for path in base_paths:
        where = parse_advisory_path(path)
        if where is not None:
            highest[where[0]] = max(highest.get(where[0], 0), where[1])
    root = None
    if base_root is not None:
        try:
            root = load_root(base_root, source="the base's trust root")
        except KictlError as exc:
            root_problem = exc.message
    else:
        root_problem = "the base has no trust root, so no signature can be valid"
    added: list[tuple[int, str, str]] = []
    for change in changes:
        where = parse_advisory_path(change.path)
        if change.status != "A":
            verb = "deletes" if change.status == "D" else "edits"
            findings.append(
                (
                    "published-changed",
                    f"{verb} a published advisory version: published files are never modified "
                    "(an update is the next version, signed by a maintainer)",
                    change.path,
                )
            )
        elif where is None:
            findings.append(("path-not-allowed", "not an advisory version (<KI-YYYY-NNNN>/<N>.dsse.json)", change.path))
        else:
            added.append((where[1], where[0], change.path))
    for version, advisory_id, path in sorted(added):
        data = head_bytes.get(path)
        if data is None:
            findings.append(("path-not-allowed", "not a regular file", path))
            continue
        expected = highest.get(advisory_id, 0) + 1
        if version != expected:
            findings.append((LINT, f"{advisory_id} version {version} does not follow version {expected - 1}", path))
            continue
        if root is None:
            findings.append((LINT, root_problem, path))
            continue
        try:
            verify_advisory(data, path=path, root=root, signed_at=signed_at)
        except KictlError as exc:
            findings.append((LINT, exc.message, path))
            continue
        highest[advisory_id] = version
    return findings


def open_advisories_at(git: Any, rev: str) -> list[Advisory]:
    """The open advisories of revision ``rev`` as readers would apply them there, read from git objects.

    Each version file is verified with that revision's trust root at the time the main line accepted
    it (capped at now); the highest valid version per id counts (``published.advisory_standing``, the rule
    every reader applies).  Never raises: anything that does
    not verify counts for nothing.  One ``git ls-tree`` when there are none.
    """
    try:
        paths = [path for path in git.list_files(rev, ADVISORIES_DIR) if parse_advisory_path(path) is not None]
        if not paths:
            return []
        root_bytes = git.read_paths(rev, [ROOT_FILE]).get(ROOT_FILE)
        if root_bytes is None:
            return []
        root = load_root(root_bytes)
        data = git.read_paths(rev, paths)
        times = git.merged_times(ADVISORIES_DIR, rev)
    except KictlError:
        return []
    now = datetime.now(UTC)
    candidates: list[Candidate] = []
    for path in paths:
        body = data.get(path)
        if body is None:
            continue
        stamp = times.get(path)
        signed_at = min(datetime.fromtimestamp(stamp, UTC), now) if stamp is not None else now
        candidates.append((path, body, signed_at, stamp is not None, None))
    return advisory_standing(candidates, root).open()


def advised_new_runs(
    advisories: Sequence[Advisory], runs: Iterable[tuple[str, str, Mapping[str, Any] | None]]
) -> list[tuple[str, str]]:
    """``(path, message)`` for each new run ``(path, status, protocol spec)`` an open advisory marks (a hint)."""
    hints = []
    for path, status, spec in runs:
        if spec is None:
            continue
        hits = [a.id for a in advisories if marks_run(a, spec, status)]  # the rule readers apply
        if hits:
            harness = spec.get("harness") or {}
            hints.append(
                (
                    path,
                    f"measured by {harness.get('name')} {harness.get('version')}, which open advisory "
                    f"{', '.join(hits)} names: it is marked as soon as it is merged; a rerun with a fixed harness "
                    "clears it (docs/advisories.md)",
                )
            )
    return hints

"""Resolving a reference (digest, prefix, name) to the record file that ``kictl verify`` checks.

The standing of many records at once (evidence levels, retractions, verifier reruns) is
``kictl.standing``'s.
"""

from __future__ import annotations

import json

from kictl import canon
from kictl.errors import KictlError, NotFoundError
from kictl.lookup import hex_prefix
from kictl.store.registry import Registry


def resolve_digest(registry: Registry, reference: str) -> str:
    """``_resolve_digest``; a record not found here but on a ``submit/...`` branch says so (exit 3)."""
    try:
        return _resolve_digest(registry, reference)
    except NotFoundError as exc:
        branch = _submit_branch_of(registry, reference)
        if branch is None:
            raise
        raise NotFoundError(
            f"{reference} is not in this checkout; `kictl submit` put it on branch {branch}: git switch {branch}"
        ) from exc


def _submit_branch_of(registry: Registry, reference: str) -> str | None:
    """The first ``submit/...`` branch that adds a record named or digested ``reference``; never raises."""
    if not registry.is_git_repository():
        return None
    try:
        history = registry.git
        refs = history._run("for-each-ref", "--format=%(refname:short)", "refs/heads/submit/").split()
        bare = hex_prefix(reference)
        for branch in refs:
            added = history._run("diff", "--name-only", "--diff-filter=A", f"HEAD...{branch}", "--", "registry/records")
            paths = [path for path in added.splitlines() if path.endswith(".json")]
            if bare is not None and any(path.rsplit("/", 1)[-1].startswith(bare) for path in paths):
                return branch
            for data in history.read_paths(branch, paths).values():
                try:
                    value = json.loads(data or b"{}")
                except ValueError:
                    continue
                if isinstance(value, dict) and (value.get("metadata") or {}).get("name") == reference:
                    return branch
    except KictlError:
        return None
    return None


def _resolve_digest(registry: Registry, reference: str) -> str:
    """The full digest of the record file a digest, unique 8+ hex prefix or name refers to.

    Unlike ``Registry.resolve`` this is the digest in the file's *name*, so a
    record whose bytes were changed can still be named and found out.  Raises
    ``NotFoundError``.
    """
    bare = hex_prefix(reference)
    if bare is not None:
        matches = registry.resolve_prefix(bare)
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise NotFoundError(f"digest prefix {reference} is ambiguous", candidates=matches[:20])
    record = registry.resolve(reference)
    if registry.has_record(record.digest):
        return record.digest
    # The bytes of the file holding this name no longer hash to its name: name the file.
    for _, path in registry.record_files([record.kind]):
        try:
            if registry.read_record(path).name == reference:
                return canon.DIGEST_PREFIX + path.stem
        except KictlError:
            continue
    return record.digest

"""What every reader believes: one rule, one place (docs/trust.md "What readers count", issue 29).

``kictl leaderboard``, ``verify``, ``show``, ``cite``, the site and review's
leaderboards all read a registry that anyone may have edited: a clone of a
pull request, a CI cache, a checkout with files added by hand.  The rules a
reader applies before it believes a file live here, so that no reader can
apply another rule than its neighbour:

* **The policy** counts only when its bytes are the ones the verified trust
  root names (``policyDigest``).  An unsigned edit is not read: the reader
  uses the version of ``registry/policy.json`` that git history holds with
  that digest, or the built-in defaults when the root names none (or git no
  longer has it).  A registry whose root has no keys yet has nothing to check
  against and its policy file counts as it is.  ``judge_policy`` is the rule
  (review reads its base through ``policy_at``); ``policy_standing`` says which
  was used and why; ``reader_policy`` is the policy.
* **Retractions** count only when signed by a maintainer or by the record's
  original submitter: every key of its earliest valid ``submission`` (by signing
  time), together.  A submitter who countersigns someone else's record later does
  not become its owner, and one co-signer alone cannot retract
  (``attestations.may_retract`` over ``evidence.record_owners``; ``kictl review``
  calls the same through ``review.seams.TrustVerifier``).
* **Derived files** (the query index, anchor state, anything under
  ``.kictl/``) are never believed when git tracks them: a committed
  ``.kictl/index.sqlite`` is ignored and rebuilt elsewhere
  (``kictl.store.derived``; ``kictl.index`` and ``kictl.trust.anchor`` call it).
* **Tampered record files** (bytes that do not hash to the file's name) are
  left out by every reader (``kictl.index`` skips them; trust never judges
  them).

A plug-in point for later rules: a rule that marks runs is a function
``(registry, digests) -> {digest: [label, ...]}`` registered with
``register_run_marks``; ``run_marks`` applies every one.  kictl registers none:
harness advisories (issue 28) became a signed document of their own, whose
marks ``kictl.standing`` applies for every reader (``standing.run_marks``), and
no reader shows this plug-in's labels yet.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kictl import canon
from kictl.errors import KictlError
from kictl.layout import POLICY_FILE, ROOT_FILE
from kictl.policy import Policy, load_policy, parse_policy
from kictl.store.git import current_commit
from kictl.store.registry import Registry
from kictl.trust.root import load_root, registry_root

PolicySource = Literal["file", "history", "defaults", "unsigned-registry"]


@dataclass(frozen=True, slots=True)
class PolicyStanding:
    """The policy a reader uses, where it came from, and a note when the file on disk was not used."""

    policy: Policy
    source: PolicySource
    note: str | None = None


def judge_policy(
    policy_bytes: bytes | None,
    signed_digest: str | None,
    keyed: bool,
    signed_version: Callable[[str], bytes | None],
) -> PolicyStanding:
    """The one rule for which policy counts (module docstring), for every reader and ``kictl review``.

    ``policy_bytes``: the policy file (``None``: absent); ``signed_digest``: the verified trust root's
    ``policyDigest``; ``keyed``: whether that root has keys; ``signed_version(digest)``: the bytes of the
    policy with that digest from git history, or ``None``.  Raises ``RecordError`` for a signed policy
    that is invalid.
    """
    if not keyed:
        policy = parse_policy(policy_bytes, POLICY_FILE) if policy_bytes is not None else Policy()
        return PolicyStanding(policy, "unsigned-registry")
    actual = canon.bytes_digest(policy_bytes) if policy_bytes is not None else None
    if signed_digest is not None and actual == signed_digest:
        assert policy_bytes is not None
        return PolicyStanding(parse_policy(policy_bytes, POLICY_FILE), "file")
    if signed_digest is None:
        if policy_bytes is None or parse_policy(policy_bytes, POLICY_FILE) == Policy():
            return PolicyStanding(Policy(), "defaults")
        note = (
            f"{POLICY_FILE} is not signed (the trust root names no policyDigest): the default policy is used; "
            "a maintainer signs it with `kictl trust sign-policy`"
        )
        return PolicyStanding(Policy(), "defaults", note)
    found = signed_version(signed_digest)
    if found is not None:
        note = (
            f"{POLICY_FILE} ({actual or 'absent'}) is not the policy the trust root signs ({signed_digest}): "
            "the signed version from git history is used"
        )
        return PolicyStanding(parse_policy(found, POLICY_FILE), "history", note)
    note = (
        f"{POLICY_FILE} ({actual or 'absent'}) is not the policy the trust root signs ({signed_digest}), "
        "and git history does not hold that version: the default policy is used"
    )
    return PolicyStanding(Policy(), "defaults", note)


@functools.lru_cache(maxsize=16)
def _standing(root: str, policy_bytes: bytes | None, signed_digest: str | None, keyed: bool) -> PolicyStanding:
    registry = Registry(Path(root))
    return judge_policy(policy_bytes, signed_digest, keyed, functools.partial(_signed_version, registry))


def _signed_version(registry: Registry, digest: str, rev: str = "HEAD") -> bytes | None:
    """The bytes of ``registry/policy.json`` in some commit reachable from ``rev`` whose digest is ``digest``;
    never raises."""
    if not registry.is_git_repository():
        return None
    try:
        history = registry.git
        revisions = history._run("log", "--format=%H", "--max-count=500", rev, "--", POLICY_FILE).split()
        for revision in revisions:
            data = history.read_file(revision, POLICY_FILE)
            if data is not None and canon.bytes_digest(data) == digest:
                return data
    except KictlError:
        return None
    return None


def policy_at(registry: Registry, rev: str) -> PolicyStanding:
    """The policy readers would use at revision ``rev``, read from git objects (``kictl review``'s base).

    ``judge_policy`` with ``rev``'s trust root (the base of a review is trusted as the registry's main
    line, so its ``root.json`` is taken as it is there).  Raises ``RecordError`` for an invalid signed
    policy or trust root, ``RegistryError`` when git fails.
    """

    found = registry.git.read_paths(rev, [ROOT_FILE, POLICY_FILE])
    policy_bytes, root_bytes = found.get(POLICY_FILE), found.get(ROOT_FILE)
    if root_bytes is None:
        policy = parse_policy(policy_bytes, POLICY_FILE) if policy_bytes is not None else Policy()
        return PolicyStanding(policy, "unsigned-registry")
    root = load_root(root_bytes, source=f"{ROOT_FILE} at {rev[:12]}")
    return judge_policy(
        policy_bytes,
        root.document.signed.policy_digest,
        not root.empty,
        functools.partial(_signed_version, registry, rev=rev),
    )


def policy_standing(registry: Registry) -> PolicyStanding:
    """The policy every reader uses (module docstring).

    Raises ``CheckFailed`` when the trust root chain does not verify,
    ``RecordError`` for a signed policy that is invalid, ``RegistryError``
    when a file cannot be read.
    """

    current_commit(registry.root)  # a corrupt git store is one clear error (exit 4), never read as "no commit"
    path = registry.policy_path
    if not (registry.root / ROOT_FILE).exists():  # no trust root at all: nothing to check the policy against
        return PolicyStanding(load_policy(path), "unsigned-registry")
    root = registry_root(registry)
    try:
        data: bytes | None = path.read_bytes()
    except FileNotFoundError:
        data = None
    except OSError:
        load_policy(path)  # raises the registry's own error for an unreadable file
        raise
    return _standing(str(registry.root), data, root.document.signed.policy_digest, not root.empty)


def reader_policy(registry: Registry) -> Policy:
    """``policy_standing(registry).policy``."""
    return policy_standing(registry).policy


# --------------------------------------------------------------------------- run marks (plug-in point)

RunMarks = Callable[[Registry, Iterable[str]], dict[str, list[str]]]
_MARKS: list[RunMarks] = []


def register_run_marks(rule: RunMarks) -> RunMarks:
    """Register a rule that labels runs (a harness advisory's ``affected-by``...); usable as a decorator."""
    if rule not in _MARKS:
        _MARKS.append(rule)
    return rule


def run_marks(registry: Registry, digests: Iterable[str]) -> dict[str, list[str]]:
    """Every registered rule's labels for ``digests``, merged in registration order."""
    wanted = list(digests)
    merged: dict[str, list[str]] = {}
    for rule in _MARKS:
        for digest, labels in rule(registry, wanted).items():
            bucket = merged.setdefault(digest, [])
            bucket.extend(label for label in labels if label not in bucket)
    return merged

"""The offline trust anchor: which trust-root version a registry's chain is verified from, and rollbacks.

A copy of a registry can delete its newest root version or replace all of
``registry/trust/`` with a chain of its own, and every link still verifies.
What it cannot change is a digest held outside the registry (docs/trust.md,
"The anchor").  A trust-root version is an *anchor* when the sha256 of its
file bytes is pinned:

* in the package (``PACKAGE_ANCHORS``: the bundled registry's root),
* in the user's config (``kictl trust pin DIGEST``; ``config_file()``),
* on this machine for this registry (``kictl trust init`` and ``reanchor``
  record the root they wrote in ``.kictl/trust.json``, git-ignored; a copy that
  commits one anyway pins nothing: ``_local_anchors``).

The chain is verified from the **highest** pinned version present upwards, so
the anchor may be any version: maintainers who lost their keys re-anchor at
the next version, signed by new keys only (``reanchor``), and the package or
the user pins it.  An install that pins only older versions keeps verifying
from those and refuses the re-anchored version (it lacks the old maintainers'
signatures), so a re-anchor is never accepted without a new pin.  Versions
below the anchor are kept (published files are never deleted) but not checked.
A keyless root cannot be an anchor: its bytes are the same in every new
registry.  ``.kictl/trust.json`` also keeps the highest version seen; a chain
below it is a rollback.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kictl import canon
from kictl.errors import CheckFailed, RegistryError, UsageError
from kictl.layout import KICTL_DIR
from kictl.store.derived import derived_file_trusted
from kictl.store.files import config_dir, write_atomic
from kictl.store.registry import Registry

if TYPE_CHECKING:
    pass

#: sha256 of the bundled registry's ``registry/trust/6.root.json``: its re-anchor of 2026-12-06 onto the team's keys
#: (the maintainer, verifier and H200 submitter keys of versions 4-5 were lost; docs/trust.md "Re-anchoring").
#: Version 4 (sha256:23620e78…, the re-anchor of 2026-12-01) was pinned before, and version 2 before it; neither is
#: pinned now, or a copy that deletes version 6 would verify from them.
PACKAGE_ANCHORS: tuple[str, ...] = ("sha256:b0782c09772af690f39db4a1fd90be46099faf3996448a956ddf7feb4cbfcae9",)
STATE_FILE = f"{KICTL_DIR}/trust.json"


@dataclass(frozen=True, slots=True)
class Anchor:
    """The trust-root version a chain was verified from, and who pinned it."""

    version: int
    digest: str
    source: str  # "package", "user config" or "this machine"

    def describe(self) -> str:
        """One line: the version, its digest shortened, and who pinned it (fits 100 columns)."""
        where = {"package": "pinned in the package", "user config": "pinned by `kictl trust pin`"}.get(
            self.source, "pinned on this machine, in .kictl/"
        )
        return f"trust root version {self.version} {self.digest[:23]}… ({where})"


def config_file() -> Path:
    """The user's kictl config file (``trust.json``)."""
    return config_dir() / "trust.json"


def _read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_bytes())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise RegistryError(f"{path}: cannot read: {exc}") from exc
    if not isinstance(value, dict):
        raise RegistryError(f"{path}: not a JSON object")
    return value


def _digests(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(item for item in value if isinstance(item, str) and canon.is_digest(item))


def user_pins() -> tuple[str, ...]:
    """The digests pinned with ``kictl trust pin``; raises ``RegistryError`` for an unreadable config."""
    return _digests(_read_json(config_file()).get("pins"))


def pin(digest: str) -> Path:
    """Add ``digest`` (``sha256:<64 hex>`` of a trust-root version file) to the user's pins; returns the file.

    Raises ``UsageError`` for a malformed digest, ``RegistryError`` when the
    config cannot be written.
    """
    if not canon.is_digest(digest):
        raise UsageError(f"{digest!r} is not a digest: expected sha256:<64 hex digits> of a trust-root version file")
    path = config_file()
    config = _read_json(path)
    pins = list(_digests(config.get("pins")))
    if digest not in pins:
        pins.append(digest)
    config["pins"] = pins
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, (json.dumps(config, indent=2, sort_keys=True) + "\n").encode())
    return path


def _state(registry: Registry) -> dict[str, Any]:
    try:
        return _read_json(registry.root / STATE_FILE)
    except RegistryError:
        return {}  # a damaged local state pins nothing; verify then says the chain is not anchored


def _write_state(registry: Registry, state: dict[str, Any]) -> None:
    path = registry.root / STATE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, (json.dumps(state, indent=2, sort_keys=True) + "\n").encode())


def _state_is_tracked(registry: Registry) -> bool:
    """Whether git's HEAD holds ``.kictl/trust.json``: then the copy brought it, not this machine.

    Fails closed: a git error counts as tracked (the local pins are then ignored
    and ``kictl verify`` says which version to pin).
    """
    return not derived_file_trusted(registry.root, STATE_FILE)


def _local_anchors(registry: Registry) -> tuple[str, ...]:
    """This machine's pins for this registry (``kictl trust init``, ``reanchor``); none when git tracks the file.

    ``.kictl/`` is git-ignored, but a copy of a registry can commit a
    ``.kictl/trust.json`` pinning a chain of its own; a clone would then carry a
    "local" pin.  So the file counts only while it is not in the commit checked
    out.  (A copy handed over as an archive with a ``.kictl/`` folder is not
    caught: unpack registries without it.)
    """
    anchors = _digests(_state(registry).get("anchors"))
    if anchors and _state_is_tracked(registry):
        return ()
    return anchors


def record_local_anchor(registry: Registry, data: bytes) -> None:
    """Pin the root version ``data`` for this registry on this machine (``kictl trust init`` wrote it)."""
    state = _state(registry)
    anchors = list(_digests(state.get("anchors")))
    digest = canon.DIGEST_PREFIX + canon.sha256_hex(data)
    if digest not in anchors:
        anchors.append(digest)
    state["anchors"] = anchors
    try:
        _write_state(registry, state)
    except OSError as exc:
        raise RegistryError(f"{registry.root / STATE_FILE}: cannot write: {exc}") from exc


def find_anchor(registry: Registry, versions: Sequence[tuple[int, bytes, bool]]) -> Anchor | None:
    """The highest pinned version among ``(version, file bytes, has keys)``, oldest first; ``None`` when none is.

    The highest, not the lowest: a pin of a later version is a decision taken
    after the earlier one (a new package release, ``kictl trust pin``, a
    maintainer's ``reanchor``), and a chain re-anchored at version N+1 does not
    link to version N by design.  What a later pin cannot do is make an
    unpinned copy trusted: the pinned bytes must be present.
    """
    sources: dict[str, str] = {}
    for digest in PACKAGE_ANCHORS:
        sources.setdefault(digest, "package")
    try:
        for digest in user_pins():
            sources.setdefault(digest, "user config")
    except RegistryError:
        pass  # an unreadable config pins nothing
    for digest in _local_anchors(registry):
        sources.setdefault(digest, "this machine")
    found: Anchor | None = None
    for version, data, keyed in versions:
        digest = canon.DIGEST_PREFIX + canon.sha256_hex(data)
        if keyed and digest in sources:
            found = Anchor(version=version, digest=digest, source=sources[digest])
    return found


def check_rollback(registry: Registry, version: int) -> None:
    """Refuse a newest version below the highest this machine has seen of this registry; remember the highest.

    Raises ``CheckFailed`` on a rollback.  The state is local (``.kictl/``);
    a read-only registry is checked but not updated.
    """
    state = _state(registry)
    seen = state.get("highestVersion")
    if isinstance(seen, int) and not isinstance(seen, bool) and version < seen:
        raise CheckFailed(
            f"rollback: the newest trust root is version {version}, but version {seen} was seen here before "
            f"({STATE_FILE}); a registry never drops a root version"
        )
    if seen != version:
        state["highestVersion"] = max(version, seen) if isinstance(seen, int) else version
        try:
            _write_state(registry, state)
        except (OSError, RegistryError):
            pass  # a read-only registry (a CI cache, a mounted checkout) is read all the same

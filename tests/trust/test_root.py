"""The trust root: its format, TUF-style rotation and the chain of versions in a registry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kictl import canon, trust
from kictl.errors import CheckFailed, NotFoundError, RecordError, UsageError
from kictl.scaffold import create_registry
from kictl.store.registry import Registry
from tests.conftest import REPO_ROOT
from tests.trust.conftest import KeyFiles, Setup, key_files


@pytest.fixture
def keys(key_folder: Path) -> dict[str, KeyFiles]:
    return {owner: key_files(key_folder, owner) for owner in ("maintainer", "maintainer2", "submitter", "stranger")}


def entry(files: KeyFiles, *roles: str, revoked: dict[str, str] | None = None) -> dict[str, Any]:
    public = trust.load_public_key(files.public)
    value: dict[str, Any] = {
        "publicKey": trust.public_bytes(public).hex(),
        "scheme": "ed25519",
        "owner": files.owner,
        "roles": list(roles),
        "notBefore": "2025-01-01T00:00:00.000Z",
    }
    if revoked:
        value["revoked"] = revoked
    return value


def root_bytes(
    version: int,
    threshold: int,
    entries: dict[str, dict[str, Any]],
    signers: list[KeyFiles],
    *,
    duplicate: bool = False,
) -> bytes:
    signed = {"apiVersion": "kernelindex.dev/v1alpha1", "kind": "TrustRoot", "version": version}
    signed |= {"threshold": threshold, "keys": entries}
    keys = [files.load() for files in signers]
    if duplicate:
        keys = keys * 2
    envelope = trust.sign_envelope(trust.ROOT_PAYLOAD_TYPE, canon.canonical_bytes(signed), keys)
    return canon.pretty_bytes({"signed": signed, "signatures": envelope["signatures"]})


EMPTY = canon.pretty_bytes(trust.initial_root_document())


# --------------------------------------------------------------------------- format


def test_bundled_root_chain_verifies() -> None:
    """The bundled registry starts from what `kictl init` writes, rotates by threshold, and is re-anchored at 4 and 6.

    Its first maintainer key was lost, so version 4 is signed by new maintainers only; then those were lost too,
    and version 6 is signed by the team's keys only (docs/trust.md, "Re-anchoring"): the chain holds from 1 to 3,
    from 4 to 5 and from 6 upwards, and not across.
    """
    folder = REPO_ROOT / "registry" / "trust"
    versions = sorted(folder.glob("*.root.json"), key=lambda path: int(path.name.split(".")[0]))
    assert versions[0].read_bytes() == EMPTY
    trust.verify_root_chain([path.read_bytes() for path in versions[:3]])
    with pytest.raises(CheckFailed, match="trust root version 4 is signed by 0 maintainer"):
        trust.verify_root_chain([path.read_bytes() for path in versions[2:4]])
    trust.verify_root_chain([path.read_bytes() for path in versions[3:5]])
    with pytest.raises(CheckFailed, match="trust root version 6 is signed by 0 maintainer"):
        trust.verify_root_chain([path.read_bytes() for path in versions[4:6]])
    current = trust.verify_root_chain([path.read_bytes() for path in versions[5:]])
    assert (folder / "root.json").read_bytes() == versions[-1].read_bytes()
    assert any("submitter" in key.roles for key in current.keys.values())
    root = trust.load_root(EMPTY)
    assert root.empty
    assert root.version == 1


def test_keyid_must_be_the_sha256_of_the_public_key(keys: dict[str, KeyFiles]) -> None:
    m = keys["maintainer"]
    data = root_bytes(2, 1, {keys["stranger"].keyid: entry(m, "maintainer")}, [m])
    with pytest.raises(RecordError, match="the keyid is not the SHA-256 of the public key"):
        trust.load_root(data)


def test_threshold_above_the_maintainers_is_refused(keys: dict[str, KeyFiles]) -> None:
    m = keys["maintainer"]
    data = root_bytes(2, 2, {m.keyid: entry(m, "maintainer")}, [m])
    with pytest.raises(RecordError, match="threshold: 2 exceeds the 1 active maintainer"):
        trust.load_root(data)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda key: key.update(roles=["owner"]), r"roles\[0\]"),
        (lambda key: key.update(roles=[]), "at least 1 item"),
        (lambda key: key.update(color="blue"), "unknown member"),
        (lambda key: key.update(revoked={"at": "2026-01-01T00:00:00.000Z", "reason": "lost"}), "reason"),
        (lambda key: key.update(notAfter="2024-01-01T00:00:00.000Z"), "notAfter is not after notBefore"),
        (lambda key: key.update(notBefore="2026-01-01"), "RFC 3339"),
    ],
)
def test_malformed_keys_are_refused(keys: dict[str, KeyFiles], change: Any, message: str) -> None:
    m = keys["maintainer"]
    value = entry(m, "maintainer")
    change(value)
    with pytest.raises(RecordError, match=message):
        trust.load_root(root_bytes(2, 1, {m.keyid: value}, [m]))


# --------------------------------------------------------------------------- rotation (TUF §5.3.4, §5.3.5)


def test_anchor_needs_a_threshold_of_its_own_maintainers(keys: dict[str, KeyFiles]) -> None:
    m, m2 = keys["maintainer"], keys["maintainer2"]
    entries = {m.keyid: entry(m, "maintainer"), m2.keyid: entry(m2, "maintainer")}
    trust.verify_root_update(EMPTY, root_bytes(2, 2, entries, [m, m2]))
    with pytest.raises(CheckFailed, match="signed by 1 of its own maintainer"):
        trust.verify_root_update(EMPTY, root_bytes(2, 2, entries, [m]))
    with pytest.raises(CheckFailed, match="signed by 0 of its own maintainer"):
        trust.verify_root_update(EMPTY, root_bytes(2, 1, entries, [keys["stranger"]]))


def test_rotation_signed_by_the_previous_threshold(keys: dict[str, KeyFiles]) -> None:
    m, s = keys["maintainer"], keys["submitter"]
    v2 = root_bytes(2, 1, {m.keyid: entry(m, "maintainer")}, [m])
    v3 = root_bytes(3, 1, {m.keyid: entry(m, "maintainer"), s.keyid: entry(s, "submitter")}, [m])
    trust.verify_root_update(v2, v3)
    assert trust.verify_root_chain([EMPTY, v2, v3]).version == 3


def test_rotation_without_the_previous_threshold(keys: dict[str, KeyFiles]) -> None:
    m, attacker = keys["maintainer"], keys["stranger"]
    v2 = root_bytes(2, 1, {m.keyid: entry(m, "maintainer")}, [m])
    # The attacker lists itself as a maintainer and signs with its own key only.
    v3 = root_bytes(3, 1, {m.keyid: entry(m, "maintainer"), attacker.keyid: entry(attacker, "maintainer")}, [attacker])
    with pytest.raises(CheckFailed, match=r"signed by 0 maintainer\(s\) of version 2, needs 1"):
        trust.verify_root_update(v2, v3)
    with pytest.raises(CheckFailed, match="signed by 0 maintainer"):
        trust.verify_root_chain([EMPTY, v2, v3])


def test_threshold_of_two_counts_distinct_keys(keys: dict[str, KeyFiles]) -> None:
    m, m2, s = keys["maintainer"], keys["maintainer2"], keys["submitter"]
    both = {m.keyid: entry(m, "maintainer"), m2.keyid: entry(m2, "maintainer")}
    v2 = root_bytes(2, 2, both, [m, m2])
    grown = {**both, s.keyid: entry(s, "submitter")}
    with pytest.raises(CheckFailed, match=r"signed by 1 maintainer\(s\) of version 2, needs 2"):
        trust.verify_root_update(v2, root_bytes(3, 2, grown, [m]))
    with pytest.raises(CheckFailed, match=r"signed by 1 maintainer\(s\) of version 2, needs 2"):
        trust.verify_root_update(v2, root_bytes(3, 2, grown, [m], duplicate=True))
    trust.verify_root_update(v2, root_bytes(3, 2, grown, [m, m2]))


def test_new_version_needs_its_own_threshold_too(keys: dict[str, KeyFiles]) -> None:
    m, m2 = keys["maintainer"], keys["maintainer2"]
    v2 = root_bytes(2, 1, {m.keyid: entry(m, "maintainer")}, [m])
    retired = {"at": "2026-01-01T00:00:00.000Z", "reason": "retired"}
    handover = {m.keyid: entry(m, "maintainer", revoked=retired), m2.keyid: entry(m2, "maintainer")}
    with pytest.raises(CheckFailed, match="signed by 0 of its own maintainer"):
        trust.verify_root_update(v2, root_bytes(3, 1, handover, [m]))
    trust.verify_root_update(v2, root_bytes(3, 1, handover, [m, m2]))


@pytest.mark.parametrize("version", [2, 4, 1])
def test_version_must_be_exactly_the_next(keys: dict[str, KeyFiles], version: int) -> None:
    m = keys["maintainer"]
    v2 = root_bytes(2, 1, {m.keyid: entry(m, "maintainer")}, [m])
    with pytest.raises(CheckFailed, match=f"version {version} cannot follow version 2 \\(expected 3\\)"):
        trust.verify_root_update(v2, root_bytes(version, 1, {m.keyid: entry(m, "maintainer")}, [m]))


def test_a_root_never_returns_to_empty(keys: dict[str, KeyFiles]) -> None:
    m = keys["maintainer"]
    v2 = root_bytes(2, 1, {m.keyid: entry(m, "maintainer")}, [m])
    with pytest.raises(CheckFailed, match="never returns to empty"):
        trust.verify_root_update(v2, root_bytes(3, 1, {}, [m]))


def test_a_signature_over_the_root_is_no_attestation(keys: dict[str, KeyFiles]) -> None:
    """Root signatures are over PAE(trust-root type, ...): the same bytes signed as another type don't count."""
    m = keys["maintainer"]
    signed = {"apiVersion": "kernelindex.dev/v1alpha1", "kind": "TrustRoot", "version": 2, "threshold": 1}
    signed["keys"] = {m.keyid: entry(m, "maintainer")}
    wrong = trust.sign_envelope(trust.PAYLOAD_TYPE, canon.canonical_bytes(signed), [m.load()])
    data = canon.pretty_bytes({"signed": signed, "signatures": wrong["signatures"]})
    with pytest.raises(CheckFailed, match="signed by 0 of its own"):
        trust.verify_root_update(EMPTY, data)


def test_corrupted_root_fails_the_check(keys: dict[str, KeyFiles]) -> None:
    with pytest.raises(CheckFailed, match="new trust root"):
        trust.verify_root_update(EMPTY, b'{"signed": {}, "signed": {}}')


# --------------------------------------------------------------------------- in a registry


def test_init_writes_the_chain_and_root_json(tmp_path: Path, keys: dict[str, KeyFiles]) -> None:
    create_registry(tmp_path / "r")
    registry = Registry(tmp_path / "r")
    m = keys["maintainer"]
    root = trust.init_root(registry, maintainers=[(trust.load_public_key(m.public), "mia")], keys=[m.load()])
    assert root.version == 2
    assert root.keys[m.keyid].owner == "mia"
    names = sorted(path.name for path in registry.trust_dir.iterdir())
    assert names == ["1.root.json", "2.root.json", "root.json"]
    assert (registry.trust_dir / "1.root.json").read_bytes() == EMPTY
    assert (registry.trust_dir / "root.json").read_bytes() == (registry.trust_dir / "2.root.json").read_bytes()
    chain = trust.root_chain(registry)
    assert chain.files == ((1, "registry/trust/1.root.json"), (2, "registry/trust/2.root.json"))
    with pytest.raises(UsageError, match="already has keys"):
        trust.init_root(registry, maintainers=[(trust.load_public_key(m.public), "mia")], keys=[m.load()])


def test_init_refuses_a_signing_key_that_is_no_maintainer(tmp_path: Path, keys: dict[str, KeyFiles]) -> None:
    create_registry(tmp_path / "r")
    registry = Registry(tmp_path / "r")
    m = keys["maintainer"]
    with pytest.raises(UsageError, match="is not among the --maintainer keys"):
        trust.init_root(registry, maintainers=[(trust.load_public_key(m.public), "m")], keys=[keys["stranger"].load()])
    with pytest.raises(UsageError, match="must be signed by its maintainers"):
        trust.init_root(registry, maintainers=[(trust.load_public_key(m.public), "m")], keys=[])
    assert sorted(p.name for p in registry.trust_dir.iterdir()) == ["root.json"]


def test_add_key_without_the_threshold_writes_nothing(tmp_path: Path, keys: dict[str, KeyFiles]) -> None:
    create_registry(tmp_path / "r")
    registry = Registry(tmp_path / "r")
    m, m2 = keys["maintainer"], keys["maintainer2"]
    pairs = [(trust.load_public_key(f.public), f.owner) for f in (m, m2)]
    trust.init_root(registry, maintainers=pairs, keys=[m.load(), m2.load()], threshold=2)
    before = sorted(p.name for p in registry.trust_dir.iterdir())
    submitter = trust.load_public_key(keys["submitter"].public)
    with pytest.raises(CheckFailed, match=r"signed by 1 maintainer\(s\) of version 2, needs 2"):
        trust.add_key(registry, submitter, owner="sam", roles=["submitter"], keys=[m.load()])
    assert sorted(p.name for p in registry.trust_dir.iterdir()) == before
    root = trust.add_key(registry, submitter, owner="sam", roles=["submitter"], keys=[m.load(), m2.load()])
    assert root.version == 3
    with pytest.raises(UsageError, match="already in the trust root"):
        trust.add_key(registry, submitter, owner="sam", roles=["submitter"], keys=[m.load(), m2.load()])


def test_revoke_names_keys_by_prefix(setup: Setup) -> None:
    signing = [setup.maintainer.load()]
    with pytest.raises(NotFoundError, match="no key 00000000"):
        trust.revoke_key(setup.registry, "00000000", reason="retired", keys=signing)
    with pytest.raises(UsageError, match="--reason is one of retired, compromised"):
        trust.revoke_key(setup.registry, setup.verifier.keyid, reason="lost", keys=signing)
    root = trust.revoke_key(setup.registry, setup.verifier.keyid[:8], reason="retired", keys=signing)
    assert root.keys[setup.verifier.keyid].revoked is not None
    root = trust.revoke_key(setup.registry, setup.verifier.keyid[:8], reason="compromised", keys=signing)
    revoked = root.keys[setup.verifier.keyid].revoked
    assert revoked is not None
    assert revoked.reason == "compromised"
    with pytest.raises(UsageError, match="already revoked"):
        trust.revoke_key(setup.registry, setup.verifier.keyid, reason="retired", keys=signing)


def test_root_json_must_be_the_newest_version(setup: Setup) -> None:
    path = setup.registry.trust_dir / "root.json"
    path.write_bytes((setup.registry.trust_dir / "3.root.json").read_bytes())
    with pytest.raises(CheckFailed, match=r"root.json is not byte for byte 5.root.json"):
        trust.root_chain(setup.registry)


def test_a_forged_newest_version_is_caught(setup: Setup) -> None:
    """An attacker edits the newest version to make its own key a verifier, and root.json with it."""
    newest = setup.registry.trust_dir / "5.root.json"
    document = json.loads(newest.read_bytes())
    document["signed"]["keys"][setup.stranger.keyid] = entry(setup.stranger, "verifier")
    forged = canon.pretty_bytes(document)
    newest.write_bytes(forged)
    (setup.registry.trust_dir / "root.json").write_bytes(forged)
    with pytest.raises(CheckFailed, match=r"version 5 is signed by 0 maintainer\(s\) of version 4"):
        trust.root_chain(setup.registry)


def test_a_missing_version_is_a_gap(setup: Setup) -> None:
    (setup.registry.trust_dir / "3.root.json").unlink()
    with pytest.raises(CheckFailed, match="lacks trust root version 3"):
        trust.root_chain(setup.registry)


def test_keys_without_kept_versions_are_refused(setup: Setup) -> None:
    for path in setup.registry.trust_dir.glob("*.root.json"):
        path.unlink()
    with pytest.raises(CheckFailed, match="keeps none of its versions"):
        trust.root_chain(setup.registry)

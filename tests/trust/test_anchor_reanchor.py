"""Re-anchoring (docs/trust.md "Re-anchoring"): the bundled registry's root after its maintainer key was lost,
and ``kictl.trust.reanchor.reanchor`` on a registry of the test's own.

Real keys, real git, the real bundled trust files.  The attacks: a copy that
deletes the re-anchored version, one that replaces it with a version its own
key signed, one that replaces the whole chain; an old install (whose package
pinned version 2) that must refuse the re-anchor until its user pins it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import git
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from kictl import canon, trust
from kictl.errors import CheckFailed, UsageError
from kictl.scaffold import create_registry
from kictl.store.registry import Registry
from kictl.trust import anchor
from kictl.trust.anchor import PACKAGE_ANCHORS, STATE_FILE
from kictl.trust.reanchor import reanchor
from tests.conftest import REPO_ROOT, RunCli, copy_bundled
from tests.trust.conftest import EPOCH, Setup, at, commit_all, key_files, sign

#: The bundled root before the first re-anchor: version 2, signed by the lost key; pinned by kictl before 2026-12-01.
OLD_PACKAGE_ANCHOR = "sha256:f11cffa35d4c3df24fc5107365835167e7779afa663588ae4ac342f1a7fbe192"
#: The first re-anchor (2026-12-01), version 4: pinned by kictl from then until the second (2026-12-06).
FIRST_REANCHOR = "sha256:23620e78bba5e3aae889e1d4d37100b90a2e507c99af50a5f0e4165b593a0482"
#: The H200 submitter key: lost with the maintainers' of versions 4-5, retired (its submissions stand).
SUBMITTER = "3f47d604845f26d6bc359c591862198ba6fc29c0848f9a94102ddfe78fe84289"
#: The maintainer key of versions 2 and 3, lost before the first re-anchor.
LOST_MAINTAINER = "a76f8824bbca411e402feeca4e5321c87233c7f56fda72ee3c140a41ebcf7eaf"
#: Every key of version 5 whose private half was lost, retired at version 6.
LOST_AT_6 = {
    "c9889df863b233fa34fb50df0bd483749bef145d93fb19d17fbf245df35b3cd6": "maintainer",
    "df0776d97edcfcfab45af13cf97dfcec3c7fb30df503fbc15b09cd873994cb50": "maintainer",
    "c04ffcf239f23f8a01b3fdfa6945278b25206ccb9dde7105f0e88e38404d330b": "verifier",
    SUBMITTER: "submitter",
}
#: The team's keys (../shared/keys/README.md), added at version 6: keyid prefix -> role.
TEAM_KEYS = {
    "be38c058fd94": "maintainer",
    "902bf7fa76f2": "maintainer",
    "98a8bcc17331": "verifier",
    "46a54e674e97": "submitter",
}
#: A bundled H200 run with a submission signed by SUBMITTER and a rerun by the lost verifier (README's example).
RUN = "sha256:3b1af870562b0b156c8833f1348b8511afe9683922e503f183018b50a65ef255"


def _digest(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def _trust_dir(registry: Registry) -> Path:
    return registry.root / "registry" / "trust"


def _versions(folder: Path) -> list[bytes]:
    paths = sorted(folder.glob("*.root.json"), key=lambda path: int(path.name.split(".")[0]))
    return [path.read_bytes() for path in paths]


def _failures(registry: Registry) -> list[str]:
    return trust.check_record(registry, RUN).failures


@pytest.fixture
def bundled(tmp_path: Path) -> Registry:
    return copy_bundled(tmp_path / "bundled", results=True)


@pytest.fixture
def old_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """kictl as released before the first re-anchor: its package pinned the bundled root's version 2."""
    monkeypatch.setattr(anchor, "PACKAGE_ANCHORS", (OLD_PACKAGE_ANCHOR,))


@pytest.fixture
def install_of_december_1(monkeypatch: pytest.MonkeyPatch) -> None:
    """kictl as released between the two re-anchors: its package pinned version 4."""
    monkeypatch.setattr(anchor, "PACKAGE_ANCHORS", (FIRST_REANCHOR,))


# --------------------------------------------------------------------------- the bundled registry


def test_the_bundled_root_is_re_anchored_at_version_6() -> None:
    folder = REPO_ROOT / "registry" / "trust"
    assert PACKAGE_ANCHORS == (_digest(folder / "6.root.json"),)
    assert _digest(folder / "2.root.json") == OLD_PACKAGE_ANCHOR  # kept, never edited
    assert _digest(folder / "4.root.json") == FIRST_REANCHOR
    versions = _versions(folder)
    with pytest.raises(CheckFailed, match="trust root version 4 is signed by 0 maintainer"):
        trust.verify_root_chain(versions)  # no link from 3 to 4: the old key is lost
    with pytest.raises(CheckFailed, match="trust root version 6 is signed by 0 maintainer"):
        trust.verify_root_chain(versions[3:])  # nor from 5 to 6: the keys of 4-5 are lost too
    current = trust.verify_root_chain(versions[5:])  # from the anchor: 6 is self-signed
    assert current.version == 6
    assert (folder / "root.json").read_bytes() == versions[-1]
    keys = current.keys
    for keyid in (LOST_MAINTAINER, *LOST_AT_6):
        revoked = keys[keyid].revoked
        assert revoked is not None, keyid
        assert revoked.reason == "retired"  # not compromised: what they signed stands
    for keyid, role in LOST_AT_6.items():
        assert keys[keyid].roles == (role,)
    active = {keyid[:12]: entry.roles for keyid, entry in keys.items() if entry.revoked is None}
    assert active == {prefix: (role,) for prefix, role in TEAM_KEYS.items()}
    assert current.threshold == 1
    assert len(current.maintainers()) == 2
    assert {entry.keyid[:12] for entry in current.document.signatures} <= {"be38c058fd94", "902bf7fa76f2"}
    policy = (REPO_ROOT / "registry" / "policy.json").read_bytes()
    assert current.document.signed.policy_digest == canon.bytes_digest(policy)  # the policy is signed


def test_bundled_registry_verifies_from_the_package_anchor(cli: RunCli, bundled: Registry) -> None:
    result = cli("verify", RUN, "--registry", bundled.root)
    assert result.exit_code == 0, result.output
    assert f"anchor     trust root version 6 {PACKAGE_ANCHORS[0][:23]}… (pinned in the package)" in result.stdout
    assert "checked    6 record(s), 0 blob(s); trust root version 6" in result.stdout
    assert "submission  valid  KernelIndex H200 bench (2026-11-30) (3f47d604)" in result.stdout
    assert "rerun       valid  KernelIndex verifier (2026-12-01) (c04ffcf2)" in result.stdout
    assert "evidence   verified" in result.stdout  # the retired verifier's rerun still counts
    result = cli("verify", RUN, "--registry", bundled.root, "--json")
    document = json.loads(result.stdout)
    assert document["anchor"].startswith("trust root version 6 ")
    result = cli("trust", "verify", "--registry", bundled.root, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["anchor"] == {
        "version": 6,
        "digest": PACKAGE_ANCHORS[0],
        "source": "package",
    }


def test_a_copy_without_version_6_is_refused(bundled: Registry) -> None:
    folder = _trust_dir(bundled)
    (folder / "6.root.json").unlink()
    shutil.copyfile(folder / "5.root.json", folder / "root.json")
    # Version 5 is current again and every link from 4 holds, but 4 is no longer pinned: read from version 1,
    # the chain breaks where the first re-anchor is.
    [failure, *_] = _failures(bundled)
    assert "trust root version 4 is signed by 0 maintainer(s) of version 3" in failure


def test_a_self_signed_version_6_is_refused(bundled: Registry, key_folder: Path) -> None:
    """Attack: replace 6 by a version 6 of the attacker's own key that keeps the other keys."""
    folder = _trust_dir(bundled)
    mallory = key_files(key_folder, "stranger")
    signed = json.loads((folder / "5.root.json").read_bytes())["signed"]
    signed["version"] = 6
    public = trust.load_public_key(mallory.public)
    signed["keys"][mallory.keyid] = {
        "publicKey": trust.public_bytes(public).hex(),
        "scheme": "ed25519",
        "owner": "KernelIndex maintainers (2026-12-06)",
        "roles": ["maintainer", "verifier"],
        "notBefore": "2026-12-06T00:00:00.000Z",
    }
    envelope = trust.sign_envelope(trust.ROOT_PAYLOAD_TYPE, canon.canonical_bytes(signed), [mallory.load()])
    data = canon.pretty_bytes({"signed": signed, "signatures": envelope["signatures"]})
    trust.verify_anchor(trust.load_root(data))  # a well-formed, self-signed version
    (folder / "6.root.json").write_bytes(data)
    (folder / "root.json").write_bytes(data)
    # Nothing pinned is left, so the chain is read from version 1, and 4 does not follow 3.
    [failure, *_] = _failures(bundled)
    assert failure == (
        "trust root: registry/trust/: trust root version 4 is signed by 0 maintainer(s) of version 3, "
        "needs 1 (signed by: none)"
    )


def test_a_replaced_chain_is_refused(bundled: Registry, tmp_path: Path, key_folder: Path) -> None:
    """Attack: registry/trust/ replaced by a chain 1..6 of the attacker's, every link valid."""
    evil = Registry(tmp_path / "evil")
    create_registry(evil.root)
    mallory = key_files(key_folder, "stranger")
    trust.init_root(evil, maintainers=[(trust.load_public_key(mallory.public), "m")], keys=[mallory.load()])
    for owner in ("submitter", "verifier", "community", "maintainer2"):
        files = key_files(key_folder, owner)
        trust.add_key(evil, trust.load_public_key(files.public), owner=owner, roles=["verifier"], keys=[mallory.load()])
    target = _trust_dir(bundled)
    shutil.rmtree(target)
    shutil.copytree(_trust_dir(evil), target)
    assert trust.root_chain(bundled).root.version == 6
    [failure, *_] = _failures(bundled)
    assert failure.startswith("trust root: no version of the trust-root chain is a pinned anchor")


@pytest.mark.parametrize("install", ["old_install", "install_of_december_1"])
def test_an_older_install_refuses_the_re_anchor_until_its_user_pins_it(
    cli: RunCli, bundled: Registry, install: str, request: pytest.FixtureRequest
) -> None:
    request.getfixturevalue(install)
    result = cli("verify", RUN, "--registry", bundled.root)
    assert result.exit_code == 1, result.output
    text = " ".join(result.stdout.split())  # the failure lines wrap at 100 columns
    broken = 4 if install == "old_install" else 6
    assert f"trust root version {broken} is signed by 0 maintainer(s) of version {broken - 1}, needs 1" in text
    assert "attestation(s) not checked: the trust root does not verify" in result.stdout
    # The user checks the digest out of band (the release notes, docs/trust.md) and pins it.
    result = cli("trust", "pin", _digest(_trust_dir(bundled) / "6.root.json"))
    assert result.exit_code == 0, result.output
    result = cli("verify", RUN, "--registry", bundled.root)
    assert result.exit_code == 0, result.output
    assert "anchor     trust root version 6 sha256:b0782c09772af690… (pinned by `kictl trust pin`)" in result.stdout


def test_an_old_pin_does_not_outvote_the_package(cli: RunCli, bundled: Registry) -> None:
    """A user who pinned version 2 or 4 before: the package's later pin is the later decision."""
    assert cli("trust", "pin", OLD_PACKAGE_ANCHOR).exit_code == 0
    assert cli("trust", "pin", FIRST_REANCHOR).exit_code == 0
    chain = trust.root_chain(bundled)
    assert chain.anchor is not None
    assert (chain.anchor.version, chain.anchor.source) == (6, "package")
    assert _failures(bundled) == []


@pytest.mark.usefixtures("install_of_december_1")
def test_an_install_that_saw_version_6_refuses_the_chain_cut_back_to_5(cli: RunCli, bundled: Registry) -> None:
    """Pinned 6 by hand and saw it; a copy that drops 6 verifies from the package's 4 but is a rollback."""
    folder = _trust_dir(bundled)
    assert cli("trust", "pin", _digest(folder / "6.root.json")).exit_code == 0
    assert _failures(bundled) == []
    assert json.loads((bundled.root / STATE_FILE).read_bytes())["highestVersion"] == 6
    (folder / "6.root.json").unlink()
    shutil.copyfile(folder / "5.root.json", folder / "root.json")
    [failure, *_] = _failures(bundled)
    assert failure.startswith("trust root: rollback: the newest trust root is version 5, but version 6 was seen")


# --------------------------------------------------------------------------- reanchor()


def _new_maintainers(key_folder: Path) -> list[tuple[Ed25519PublicKey, str]]:
    return [(trust.load_public_key(key_files(key_folder, "maintainer2").public), "new maintainer")]


def test_reanchor_writes_the_next_version_signed_by_new_keys_only(setup: Setup, key_folder: Path) -> None:
    sign(setup, setup.submitter)
    commit_all(setup.registry, at("2025-07-01"), "a submission")
    newcomer = key_files(key_folder, "maintainer2")
    before = sorted(p.name for p in _trust_dir(setup.registry).iterdir())
    root = reanchor(
        setup.registry, maintainers=_new_maintainers(key_folder), keys=[newcomer.load()], at=at("2025-08-01")
    )
    assert root.version == 6
    folder = _trust_dir(setup.registry)
    assert sorted(p.name for p in folder.iterdir()) == sorted([*before, "6.root.json"])
    assert (folder / "6.root.json").read_bytes() == (folder / "root.json").read_bytes() == root.data
    assert [entry.keyid for entry in root.document.signatures] == [newcomer.keyid]
    old = setup.maintainer.keyid
    revoked = root.keys[old].revoked
    assert revoked is not None
    assert (revoked.reason, revoked.at) == ("retired", "2025-08-01T00:00:00.000Z")
    assert set(root.maintainers()) == {newcomer.keyid}
    for kept in (setup.submitter, setup.verifier, setup.community):
        assert root.keys[kept.keyid].revoked is None
    with pytest.raises(CheckFailed, match="signed by 0 maintainer"):
        trust.verify_root_update(_versions(folder)[4], root.data)  # not a rotation: it cannot be
    state = json.loads((setup.registry.root / STATE_FILE).read_bytes())
    assert state["anchors"] == [_digest(folder / "6.root.json")]  # this machine's pin of version 2 is replaced
    chain = trust.root_chain(setup.registry)
    assert chain.anchor is not None
    assert chain.anchor.version == 6
    commit_all(setup.registry, at("2025-08-02"), "re-anchor")
    report = trust.check_record(setup.registry, setup.run.digest)
    assert report.ok, report.failures  # the submission signed before the re-anchor still verifies
    assert report.trust is not None
    assert report.trust.submitted


def test_after_a_reanchor_the_new_key_rotates_and_the_old_one_cannot(setup: Setup, key_folder: Path) -> None:
    newcomer = key_files(key_folder, "maintainer2")
    reanchor(setup.registry, maintainers=_new_maintainers(key_folder), keys=[newcomer.load()])
    stranger = trust.load_public_key(setup.stranger.public)
    with pytest.raises(CheckFailed, match="signed by 0 maintainer"):
        trust.add_key(setup.registry, stranger, owner="x", roles=["submitter"], keys=[setup.maintainer.load()])
    root = trust.add_key(setup.registry, stranger, owner="x", roles=["submitter"], keys=[newcomer.load()])
    assert root.version == 7
    assert trust.root_chain(setup.registry).root.version == 7


def test_reanchor_as_compromised_invalidates_the_old_keys_signatures(setup: Setup, key_folder: Path) -> None:
    """A retraction the old maintainer signed counts after a `retired` re-anchor, not after a `compromised` one."""
    sign(setup, setup.maintainer, "retraction", {"reason": "a test retraction"})
    commit_all(setup.registry, at("2025-07-01"), "retraction")
    assert trust.check_record(setup.registry, setup.run.digest).failures == []
    newcomer = key_files(key_folder, "maintainer2")
    reanchor(setup.registry, maintainers=_new_maintainers(key_folder), keys=[newcomer.load()], reason="compromised")
    commit_all(setup.registry, at("2025-08-01"), "re-anchor")
    [failure] = trust.check_record(setup.registry, setup.run.digest).failures
    assert "revoked as compromised" in failure


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("signer-not-new", "is not among the new maintainers"),
        ("already-listed", "is already in trust root version 5"),
        ("threshold", "--threshold 2 must be between 1 and the 1 new maintainer"),
        ("reason", "--reason is one of retired, compromised"),
        ("no-maintainers", "a re-anchor names its new maintainers"),
    ],
)
def test_reanchor_refusals_write_nothing(setup: Setup, key_folder: Path, case: str, message: str) -> None:
    newcomer = key_files(key_folder, "maintainer2")
    maintainers = _new_maintainers(key_folder)
    keys = [newcomer.load()]
    threshold, reason = 1, "retired"
    if case == "signer-not-new":
        keys = [newcomer.load(), setup.maintainer.load()]
    elif case == "already-listed":
        maintainers = [(trust.load_public_key(setup.verifier.public), "verifier"), *maintainers]
    elif case == "threshold":
        threshold = 2
    elif case == "reason":
        reason = "lost"
    elif case == "no-maintainers":
        maintainers = []
    folder = _trust_dir(setup.registry)
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    state = (setup.registry.root / STATE_FILE).read_bytes()
    with pytest.raises(UsageError, match=message):
        reanchor(setup.registry, maintainers=maintainers, keys=keys, threshold=threshold, reason=reason)
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == before
    assert (setup.registry.root / STATE_FILE).read_bytes() == state


def test_reanchor_refuses_a_threshold_its_signatures_miss(setup: Setup, key_folder: Path) -> None:
    newcomer = key_files(key_folder, "maintainer2")
    # Two new maintainers, threshold 2, but only one of them signs.
    maintainers = [*_new_maintainers(key_folder), (trust.load_public_key(setup.stranger.public), "second")]
    folder = _trust_dir(setup.registry)
    before = sorted(path.name for path in folder.iterdir())
    with pytest.raises(CheckFailed, match="has 1 valid signature"):
        reanchor(setup.registry, maintainers=maintainers, keys=[newcomer.load()], threshold=2)
    assert sorted(path.name for path in folder.iterdir()) == before


def test_review_lints_a_reanchor(cli: RunCli, setup: Setup, key_folder: Path) -> None:
    """A re-anchor cannot pass review (no old maintainer signed it): a maintainer merges it out of band."""
    repo = git.Repo(setup.registry.root)
    repo.git.checkout("-b", "reanchor")
    newcomer = key_files(key_folder, "maintainer2")
    reanchor(setup.registry, maintainers=_new_maintainers(key_folder), keys=[newcomer.load()], at=EPOCH)
    commit_all(setup.registry, at("2025-08-01"), "re-anchor")
    result = cli("review", "--base", "main", "--head", "reanchor", "--registry", setup.registry.root, "--json")
    assert result.exit_code == 1, result.output
    lints = json.loads(result.stdout)["lints"]
    assert lints == [
        {
            "code": "trust-root-threshold",
            "message": "trust root version 6 is signed by 0 maintainer(s) of version 5, needs 1 (signed by: none)",
            "path": "registry/trust/6.root.json",
        }
    ]


def test_the_reanchor_command(cli: RunCli, setup: Setup, key_folder: Path) -> None:
    newcomer = key_files(key_folder, "maintainer2")
    args = ("trust", "reanchor", "--maintainer", newcomer.public, "--key", newcomer.private)
    result = cli(*args, "--registry", setup.registry.root)
    assert result.exit_code == 0, result.output
    digest = _digest(_trust_dir(setup.registry) / "6.root.json")
    assert f"readers pin it with: kictl trust pin {digest}" in result.output
    assert "retired" in result.stdout
    result = cli(*args, "--registry", setup.registry.root)
    assert result.exit_code == 2, result.output
    assert "is already in trust root version 6" in result.output


def test_reanchor_carries_the_other_lost_keys_and_the_policy(cli: RunCli, setup: Setup, key_folder: Path) -> None:
    """One version does the whole re-anchor: new maintainers, a new verifier, the lost verifier retired, the policy."""
    newcomer = key_files(key_folder, "maintainer2")
    verifier = key_files(key_folder, "stranger")
    result = cli(
        "trust", "reanchor", "--maintainer", newcomer.public, "--key", newcomer.private,
        "--verifier", verifier.public, "--retire", setup.verifier.keyid[:12], "--sign-policy",
        "--registry", setup.registry.root,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    root = trust.root_chain(setup.registry).root
    assert root.version == 6
    assert root.keys[verifier.keyid].roles == ("verifier",)
    assert root.keys[verifier.keyid].revoked is None
    revoked = root.keys[setup.verifier.keyid].revoked
    assert revoked is not None
    assert revoked.reason == "retired"
    assert root.keys[setup.submitter.keyid].revoked is None  # not named: kept
    assert root.document.signed.policy_digest == canon.bytes_digest(setup.registry.policy_path.read_bytes())


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--retire", "abc"], "--retire abc: give the keyid"),
        (["--retire", "0" * 12], "of exactly one key of trust root version 5"),
        (["--verifier", "SELF"], "is listed twice"),
    ],
)
def test_reanchor_option_refusals_write_nothing(
    cli: RunCli, setup: Setup, key_folder: Path, extra: list[str], message: str
) -> None:
    newcomer = key_files(key_folder, "maintainer2")
    extra = [str(newcomer.public) if value == "SELF" else value for value in extra]
    folder = _trust_dir(setup.registry)
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    result = cli(
        "trust", "reanchor", "--maintainer", newcomer.public, "--key", newcomer.private, *extra,
        "--registry", setup.registry.root,
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == before

"""The offline anchor (docs/trust.md "The anchor"): attacks on a copy of a registry's trust root.

Real keys, real registries: a copy that deletes its newest root version, one
that replaces ``registry/trust/`` with a self-signed chain of its own, a chain
re-anchored at a later version by new maintainers, and the bundled registry's
package pin.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from kictl import canon, trust
from kictl.scaffold import create_registry
from kictl.store.registry import Registry
from kictl.trust.anchor import PACKAGE_ANCHORS, STATE_FILE
from tests.conftest import REPO_ROOT, RunCli
from tests.trust.conftest import EPOCH, Setup, key_files, sign


def _digest(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def _failures(setup: Setup) -> list[str]:
    return trust.check_record(setup.registry, setup.run.digest).failures


def test_verify_says_which_anchor_it_used(setup: Setup, cli: RunCli) -> None:
    sign(setup, setup.submitter)
    report = trust.check_record(setup.registry, setup.run.digest)
    assert report.ok, report.failures
    assert report.anchor is not None
    assert report.anchor.startswith("trust root version 2 sha256:")
    assert report.anchor.endswith("(pinned on this machine, in .kictl/)")
    result = cli("verify", setup.run.digest, "--registry", str(setup.registry.root))
    assert result.exit_code == 0, result.output
    assert "anchor     trust root version 2 sha256:" in result.stdout


def test_deleting_the_newest_root_version_is_a_rollback(setup: Setup) -> None:
    assert _failures(setup) == []  # seen: version 5
    trust_dir = setup.registry.root / "registry/trust"
    (trust_dir / "5.root.json").unlink()
    shutil.copyfile(trust_dir / "4.root.json", trust_dir / "root.json")
    assert trust.root_chain(setup.registry).root.version == 4  # the chain itself still links
    [failure] = _failures(setup)
    assert failure.startswith("trust root: rollback: the newest trust root is version 4, but version 5 was seen")


def test_a_self_signed_replacement_chain_is_not_anchored(setup: Setup, tmp_path: Path, key_folder: Path) -> None:
    """Attack: replace registry/trust/ with a chain of the attacker's own, made elsewhere, all links valid."""
    sign(setup, setup.submitter)
    evil = tmp_path / "evil"
    create_registry(evil)
    mallory = key_files(key_folder, "stranger")
    trust.init_root(
        Registry(evil),
        maintainers=[(trust.load_public_key(mallory.public), "mallory")],
        keys=[mallory.load()],
        not_before=EPOCH,
    )
    target = setup.registry.root / "registry/trust"
    shutil.rmtree(target)
    shutil.copytree(evil / "registry/trust", target)
    assert trust.root_chain(setup.registry).anchor is None  # every link verifies, but nothing pins it
    failure = _failures(setup)[0]
    assert failure.startswith("trust root: no version of the trust-root chain is a pinned anchor")
    assert f"if you trust registry/trust/2.root.json, pin it: kictl trust pin {_digest(target / '2.root.json')}" in (
        failure
    )


def test_a_lost_local_state_does_not_anchor_a_fresh_clone(setup: Setup) -> None:
    (setup.registry.root / STATE_FILE).unlink()
    [failure, *_] = _failures(setup)
    assert "no version of the trust-root chain is a pinned anchor" in failure


def test_pinning_a_later_version_reanchors_the_chain(setup: Setup, cli: RunCli, key_folder: Path) -> None:
    """New maintainers re-anchor at version 6 without the old maintainers' signatures; a pin of 6 accepts it."""
    (setup.registry.root / STATE_FILE).unlink()
    newcomer = key_files(key_folder, "maintainer2")
    current = trust.registry_root(setup.registry)
    signed = {
        "apiVersion": "kernelindex.dev/v1alpha1",
        "kind": "TrustRoot",
        "version": current.version + 1,
        "threshold": 1,
        "keys": {
            trust.keyid_of(trust.load_public_key(newcomer.public)): {
                "publicKey": trust.public_bytes(trust.load_public_key(newcomer.public)).hex(),
                "scheme": "ed25519",
                "owner": "newcomer",
                "roles": ["maintainer"],
                "notBefore": "2025-01-01T00:00:00.000Z",
            }
        },
    }
    envelope = trust.sign_envelope(trust.ROOT_PAYLOAD_TYPE, canon.canonical_bytes(signed), [newcomer.load()])
    data = canon.pretty_bytes({"signed": signed, "signatures": envelope["signatures"]})
    trust_dir = setup.registry.root / "registry/trust"
    (trust_dir / "6.root.json").write_bytes(data)
    (trust_dir / "root.json").write_bytes(data)
    result = cli("trust", "verify", "--registry", str(setup.registry.root))
    assert result.exit_code == 1  # from version 1 upwards, 5 → 6 lacks the old maintainers
    assert "signed by 0 maintainer(s) of version 5" in result.output
    result = cli("trust", "pin", _digest(trust_dir / "6.root.json"))
    assert result.exit_code == 0, result.output
    result = cli("trust", "verify", "--registry", str(setup.registry.root))
    assert result.exit_code == 0, result.output
    assert "anchor     trust root version 6 sha256:" in result.stdout
    assert "(pinned by `kictl trust pin`)" in result.stdout


def test_pin_refuses_what_is_not_a_digest(cli: RunCli) -> None:
    result = cli("trust", "pin", "f11cffa35d4c")
    assert result.exit_code == 2
    assert "is not a digest: expected sha256:<64 hex digits>" in result.output


def test_the_bundled_registry_is_anchored_by_the_package(tmp_path: Path) -> None:
    target = tmp_path / "bundled"
    shutil.copytree(REPO_ROOT / "registry", target / "registry")
    chain = trust.root_chain(Registry(target))
    assert chain.anchor is not None
    assert chain.anchor.source == "package"
    assert chain.anchor.digest in PACKAGE_ANCHORS
    assert _digest(target / f"registry/trust/{chain.anchor.version}.root.json") == chain.anchor.digest


def test_a_committed_local_state_pins_nothing(setup: Setup, tmp_path: Path, key_folder: Path) -> None:
    """Attack: a copy with a chain of its own also commits the `.kictl/trust.json` that pins it; a clone carries it."""
    import git

    evil = tmp_path / "evil"
    create_registry(evil)
    mallory = key_files(key_folder, "stranger")
    trust.init_root(
        Registry(evil),
        maintainers=[(trust.load_public_key(mallory.public), "mallory")],
        keys=[mallory.load()],
        not_before=EPOCH,
    )
    root = setup.registry.root
    shutil.rmtree(root / "registry/trust")
    shutil.copytree(evil / "registry/trust", root / "registry/trust")
    shutil.copyfile(evil / STATE_FILE, root / STATE_FILE)
    chain = trust.root_chain(setup.registry)
    assert chain.anchor is not None  # untracked, it is this machine's pin: here it counts
    assert chain.anchor.source == "this machine"
    repo = git.Repo(root)
    repo.git.add("--force", STATE_FILE)
    repo.git.add("registry")
    repo.index.commit("a chain of my own, pinned")
    clone = tmp_path / "clone"
    git.Repo.clone_from(root, clone)
    assert (clone / STATE_FILE).read_bytes() == (evil / STATE_FILE).read_bytes()
    copy = Registry(clone)
    assert trust.root_chain(copy).anchor is None
    [failure, *_] = trust.check_record(copy, setup.run.digest).failures
    assert failure.startswith("trust root: no version of the trust-root chain is a pinned anchor")
    assert trust.root_chain(setup.registry).anchor is None  # committed here too: no longer this machine's

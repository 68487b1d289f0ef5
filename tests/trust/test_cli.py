"""The commands: keygen, sign, verify, show, trust init/add-key/revoke/verify/show; one test per exit code."""

from __future__ import annotations

import hashlib
import json
import re
import stat
from pathlib import Path

import pytest

from kictl import canon, trust
from kictl.errors import EnvError
from kictl.scaffold import create_registry
from kictl.store.registry import Registry
from tests.conftest import RunCli
from tests.trust.conftest import Setup, add_records, at, build_records, commit_all, rerun_predicate, sign

SINCE = "2025-01-01T00:00:00Z"


def assert_fits(text: str) -> None:
    too_wide = [line for line in text.splitlines() if len(line) > 100]
    assert not too_wide, too_wide


# --------------------------------------------------------------------------- keygen


def test_keygen_writes_a_private_and_a_public_key(cli: RunCli, tmp_path: Path) -> None:
    result = cli("keygen", "--out", tmp_path / "alice.key", "--owner", "Alice Example")
    assert result.exit_code == 0, result.output
    keyid = result.stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{64}", keyid)
    private = tmp_path / "alice.key"
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert private.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    public = tmp_path / "alice.key.pub"
    assert public.read_text().startswith(f"owner: Alice Example\nkeyid: {keyid}\n-----BEGIN PUBLIC KEY-----")
    assert trust.keyid_of(trust.load_public_key(public)) == keyid
    assert trust.keyid_of(trust.load_private_key(private).public_key()) == keyid
    assert trust.public_key_owner(public) == "Alice Example"


def test_keygen_refuses_to_overwrite(cli: RunCli, tmp_path: Path) -> None:
    (tmp_path / "k.pub").write_text("something precious")
    result = cli("keygen", "--out", tmp_path / "k")
    assert result.exit_code == 2, result.output
    assert "k.pub exists; keygen never overwrites a key" in result.stderr
    assert not (tmp_path / "k").exists()
    assert (tmp_path / "k.pub").read_text() == "something precious"


def test_passphrase_protected_key(cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KICTL_KEY_PASSPHRASE", "correct horse")
    assert cli("keygen", "--out", tmp_path / "k").exit_code == 0
    assert b"ENCRYPTED PRIVATE KEY" in (tmp_path / "k").read_bytes()
    assert trust.load_private_key(tmp_path / "k")
    create_registry(tmp_path / "r")
    monkeypatch.setenv("KICTL_KEY_PASSPHRASE", "wrong horse")
    result = cli("trust", "init", "--key", tmp_path / "k", "--registry", tmp_path / "r")
    assert result.exit_code == 5, result.output
    assert "error: cannot decrypt" in result.stderr
    assert "wrong passphrase in $KICTL_KEY_PASSPHRASE" in result.stderr
    monkeypatch.delenv("KICTL_KEY_PASSPHRASE")
    result = cli("trust", "init", "--key", tmp_path / "k", "--registry", tmp_path / "r")
    assert result.exit_code == 5, result.output
    assert "is encrypted; set $KICTL_KEY_PASSPHRASE" in result.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"not a key", "is not a PEM private key"),
        (
            b"-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAZEv7uAd5tDEbKa07yWqGOSd7b45UWPPnEQEkcpitycw=\n",
            "is a public key",
        ),
    ],
)
def test_unusable_private_key_files(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.key"
    path.write_bytes(content)
    path.chmod(0o600)
    with pytest.raises(EnvError, match=message):
        trust.load_private_key(path)
    with pytest.raises(EnvError, match="no private key at"):
        trust.load_private_key(tmp_path / "absent.key")


def test_a_pub_file_as_key_says_it_is_a_public_key(cli: RunCli, tmp_path: Path) -> None:
    """A .pub passed as --key gets "is a public key", not chmod advice (a .pub is world-readable by design)."""
    cli("keygen", "--out", tmp_path / "k.key", "--owner", "K")
    public = tmp_path / "k.key.pub"
    public.chmod(0o644)
    create_registry(tmp_path / "r")
    result = cli("trust", "init", "--key", public, "--registry", tmp_path / "r")
    assert result.exit_code == 5, result.output
    assert "is a public key; --key takes the private key file" in result.stderr
    assert "chmod" not in result.stderr


def test_public_key_files_must_be_public(tmp_path: Path) -> None:
    trust.generate_keypair(tmp_path / "k")
    with pytest.raises(EnvError, match=r"holds a private key; give its \.pub file"):
        trust.load_public_key(tmp_path / "k")


# --------------------------------------------------------------------------- trust ...


def test_trust_commands_end_to_end(cli: RunCli, tmp_path: Path) -> None:
    create_registry(tmp_path / "r")
    keys = tmp_path / "keys"
    keys.mkdir()
    for owner in ("mia", "sam", "vic"):
        assert cli("keygen", "--out", keys / f"{owner}.key", "--owner", owner).exit_code == 0
    reg = ("--registry", tmp_path / "r")
    result = cli("trust", "show", *reg)
    assert result.exit_code == 0, result.output
    assert "no keys: nothing is trusted yet" in result.stdout
    result = cli("trust", "init", "--key", keys / "mia.key", "--not-before", SINCE, *reg)
    assert result.exit_code == 0, result.output
    assert "published trust root version 2" in result.stderr
    result = cli("trust", "init", "--key", keys / "mia.key", *reg)
    assert result.exit_code == 2, result.output
    assert "already has keys" in result.stderr
    for owner, role in (("sam", "submitter"), ("vic", "verifier")):
        args = ("trust", "add-key", keys / f"{owner}.key.pub", "--role", role, "--key", keys / "mia.key")
        result = cli(*args, "--not-before", SINCE, *reg)
        assert result.exit_code == 0, result.output
    result = cli("trust", "show", "--json", *reg)
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["version"] == 4
    assert shown["threshold"] == 1
    assert sorted((k["owner"], tuple(k["roles"]), k["status"]) for k in shown["keys"]) == [
        ("mia", ("maintainer",), "active"),
        ("sam", ("submitter",), "active"),
        ("vic", ("verifier",), "active"),
    ]
    vic = next(k["keyid"] for k in shown["keys"] if k["owner"] == "vic")
    result = cli("trust", "revoke", vic[:10], "--reason", "retired", "--key", keys / "mia.key")
    assert result.exit_code == 4, result.output  # no registry here (cwd is tmp_path)
    result = cli(
        "trust",
        "revoke",
        vic[:10],
        "--reason",
        "retired",
        "--at",
        "2026-06-01T00:00:00Z",
        "--key",
        keys / "mia.key",
        *reg,
    )
    assert result.exit_code == 0, result.output
    assert_fits(result.stdout)
    assert re.search(r"vic\s+verifier\s+2025-01-01\.\.\s+retired 2026-06-01", result.stdout)
    result = cli("trust", "verify", "--json", *reg)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "ok": True,
        "version": 5,
        "versions": [{"version": v, "path": f"registry/trust/{v}.root.json"} for v in range(1, 6)],
        "anchor": {
            "version": 2,
            "digest": "sha256:" + hashlib.sha256((tmp_path / "r/registry/trust/2.root.json").read_bytes()).hexdigest(),
            "source": "this machine",
        },
    }


def test_trust_add_key_without_maintainer_key_is_a_usage_error(cli: RunCli, setup: Setup) -> None:
    result = cli("trust", "add-key", setup.stranger.public, "--role", "verifier", "--registry", setup.registry.root)
    assert result.exit_code == 2, result.output
    result = cli(
        "trust", "add-key", setup.stranger.public, "--role", "boss", "--key", setup.maintainer.private,
        "--registry", setup.registry.root,
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "roles are among maintainer, submitter, verifier" in result.stderr


def test_trust_add_key_signed_by_a_non_maintainer_says_no(cli: RunCli, setup: Setup) -> None:
    result = cli(
        "trust", "add-key", setup.stranger.public, "--role", "verifier", "--key", setup.submitter.private,
        "--registry", setup.registry.root,
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "signed by 0 maintainer(s) of version 5, needs 1" in result.stderr
    assert not (setup.registry.trust_dir / "6.root.json").exists()


def test_trust_revoke_unknown_key_is_exit_3(cli: RunCli, setup: Setup) -> None:
    args = ("trust", "revoke", "deadbeefdeadbeef", "--reason", "retired", "--key", setup.maintainer.private)
    result = cli(*args, "--registry", setup.registry.root)
    assert result.exit_code == 3, result.output
    assert "error: no key deadbeefdeadbeef in trust root version 5" in result.stderr


def test_trust_verify_of_a_broken_chain_is_exit_1(cli: RunCli, setup: Setup) -> None:
    (setup.registry.trust_dir / "root.json").write_bytes((setup.registry.trust_dir / "2.root.json").read_bytes())
    result = cli("trust", "verify", "--registry", setup.registry.root, "--json")
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["ok"] is False
    assert "root.json is not byte for byte 5.root.json" in result.stderr


# --------------------------------------------------------------------------- sign, verify, show


def test_sign_verify_show(cli: RunCli, setup: Setup) -> None:
    reg = ("--registry", setup.registry.root)
    result = cli("sign", setup.run.name, "--key", setup.submitter.private, *reg)
    assert result.exit_code == 0, result.output
    path = result.stdout.strip()
    hex_digest = canon.digest_hex(setup.run.digest)
    assert re.fullmatch(rf"registry/attestations/{hex_digest[:2]}/{hex_digest}/[0-9a-f]{{64}}\.dsse\.json", path)
    predicate = setup.registry.root / "rerun.json"
    predicate.write_text(json.dumps(rerun_predicate(0.97)))
    result = cli(
        "sign", hex_digest[:12], "--key", setup.verifier.private, "--type", "rerun", "--predicate", predicate, *reg
    )
    assert result.exit_code == 0, result.output
    commit_all(setup.registry, at("2026-02-01"), "attestations")
    result = cli("verify", setup.run.digest, *reg)
    assert result.exit_code == 0, result.output
    assert_fits(result.stdout)
    assert "evidence   verified · 0 community rerun(s) · 0 review(s)" in result.stdout
    assert "checked    6 record(s), 0 blob(s); trust root version 5" in result.stdout
    assert re.search(r"submission\s+valid\s+submitter \(\w{8}\)\s+2026-02-01 00:00\s", result.stdout)
    assert re.search(r"rerun\s+valid\s+verifier \(\w{8}\)\s+2026-02-01 00:00\s+agrees 0.970 \(counts\)", result.stdout)
    assert "not committed yet" not in result.stdout
    result = cli("show", setup.run.name, *reg)
    assert result.exit_code == 0, result.output
    assert "evidence: verified · 0 community rerun(s) · 0 review(s)" in result.stdout
    assert "attestations (2):" in result.stdout
    result = cli("show", setup.run.digest, *reg, "--json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["evidence"]["level"] == "verified"
    assert sorted(a["type"] for a in shown["attestations"]) == ["rerun", "submission"]
    assert shown["record"] == setup.run.raw


def test_verify_lists_every_failure_and_exits_1(cli: RunCli, setup: Setup) -> None:
    sign(setup, setup.stranger)
    sign(setup, setup.verifier)  # a submission by a verifier
    path = setup.registry.record_path("Implementation", setup.records.implementation.digest)
    raw = json.loads(path.read_bytes())
    raw["spec"]["license"] = "MIT"
    path.write_bytes(canon.pretty_bytes(raw))
    result = cli("verify", setup.run.digest, "--registry", setup.registry.root, "--json")
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["ok"] is False
    assert len(report["failures"]) == 3
    text = "\n".join(report["failures"])
    assert "unknown key" in text
    assert "role: a submission needs a submitter key" in text
    assert "file name is not the record's digest" in text
    assert "error: 3 failure(s) verifying" in result.stderr
    result = cli("verify", setup.run.digest, "--registry", setup.registry.root)
    assert result.exit_code == 1, result.output
    assert_fits(result.stdout)
    assert "failures (3)" in result.stdout


def test_show_of_a_record_without_attestations(cli: RunCli, setup: Setup) -> None:
    result = cli("show", setup.records.workload.digest, "--registry", setup.registry.root)
    assert result.exit_code == 0, result.output
    assert "evidence: unsigned · 0 community rerun(s) · 0 review(s)" in result.stdout
    assert "attestations: none" in result.stdout


def test_sign_exit_codes(cli: RunCli, setup: Setup) -> None:
    reg = ("--registry", setup.registry.root)
    result = cli("sign", setup.run.digest, "--key", setup.submitter.private, "--type", "vote", *reg)
    assert result.exit_code == 2, result.output
    assert "unknown attestation type 'vote'" in result.stderr
    bad = setup.registry.root / "bad.json"
    bad.write_text('{"note": ""}')
    result = cli(
        "sign", setup.run.digest, "--key", setup.submitter.private, "--type", "review", "--predicate", bad, *reg
    )
    assert result.exit_code == 3, result.output
    assert "review predicate: $.note" in result.stderr
    result = cli("sign", "sha256:" + "0" * 64, "--key", setup.submitter.private, *reg)
    assert result.exit_code == 3, result.output
    setup.submitter.private.chmod(0o640)
    try:
        result = cli("sign", setup.run.digest, "--key", setup.submitter.private, *reg)
    finally:
        setup.submitter.private.chmod(0o600)
    assert result.exit_code == 5, result.output
    assert "permissions 0640 are too open" in result.stderr
    result = cli("sign", setup.run.digest, "--key", setup.stranger.private, *reg)
    assert result.exit_code == 0, result.output
    assert "warning: key" in result.stderr
    assert "is not in the trust root" in result.stderr


def test_verify_exit_codes(cli: RunCli, setup: Setup, tmp_path: Path) -> None:
    result = cli("verify", "0000000000", "--registry", setup.registry.root)
    assert result.exit_code == 3, result.output
    (tmp_path / "nowhere").mkdir()
    result = cli("verify", setup.run.digest, "--registry", tmp_path / "nowhere")
    assert result.exit_code == 4, result.output
    assert "is not a registry" in result.stderr


def test_verify_of_a_registry_without_git(cli: RunCli, tmp_path: Path, key_folder: Path) -> None:
    """Outside git every envelope is judged as signed now."""
    from tests.trust.conftest import key_files

    (tmp_path / "plain" / "registry" / "trust").mkdir(parents=True)
    registry = Registry(tmp_path / "plain")
    (registry.trust_dir / "root.json").write_bytes(canon.pretty_bytes(trust.initial_root_document()))
    m, s = key_files(key_folder, "maintainer"), key_files(key_folder, "submitter")
    trust.init_root(registry, maintainers=[(trust.load_public_key(m.public), "m")], keys=[m.load()])
    trust.add_key(registry, trust.load_public_key(s.public), owner="s", roles=["submitter"], keys=[m.load()])
    records = build_records()
    add_records(registry, records.all())
    trust.sign_record(registry, records.run.digest, s.private)
    result = cli("verify", records.run.digest, "--registry", registry.root, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["attestations"][0]["committed"] is False


def test_verify_by_name_finds_a_tampered_record(cli: RunCli, setup: Setup) -> None:
    sign(setup, setup.submitter)
    path = setup.registry.record_path("BenchmarkRun", setup.run.digest)
    path.write_bytes(path.read_bytes().replace(b'"median": 1000000', b'"median": 100000'))
    result = cli("verify", setup.run.name, "--registry", setup.registry.root, "--json")
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["digest"] == setup.run.digest
    assert any("file name is not the record's digest" in f for f in report["failures"])
    (attestation,) = report["attestations"]
    assert attestation["type"] is None  # the statement is about the record as signed, not as it is now
    assert attestation["signers"][0]["owner"] == "submitter"

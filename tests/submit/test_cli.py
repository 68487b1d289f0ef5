"""Tests of the ``kictl submit`` command: one per documented exit code, --json, --push, the text report."""

from __future__ import annotations

import json
from pathlib import Path

import git
import pytest

from kictl import canon
from kictl.store.registry import Registry
from tests.conftest import RunCli
from tests.submit.conftest import Keys, bench_out, chain_with_runs, commit_records, loose_copy, snapshot, write_json


def _submit(cli: RunCli, registry: Registry, *args: str | Path) -> object:
    return cli("submit", *args, "--registry", registry.root)


def test_exit_0_json_names_branch_commit_runs_and_attestations(
    cli: RunCli, registry: Registry, keys: Keys, tmp_path: Path
) -> None:
    values = chain_with_runs((12_500, 11_000))
    folder = bench_out(tmp_path / "out", values)
    result = cli("submit", folder, "--key", keys.private("submitter"), "--registry", registry.root, "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    runs = [canon.record_digest(value) for value in values if value["kind"] == "BenchmarkRun"]
    # The manifest's members are in digest order: so are the runs, and the branch is named after the first.
    assert [run["digest"] for run in document["runs"]] == sorted(runs)
    assert document["branch"] == "submit/" + sorted(runs)[0][7:19]
    assert git.Repo(registry.root).commit(document["branch"]).hexsha == document["commit"]
    assert document["base"]["branch"] == "main"
    latency = {run["digest"]: run["latencyNs"] for run in document["runs"]}
    assert [latency[digest] for digest in runs] == [12_500, 11_000]
    assert [item["digest"] for item in document["attestations"]] == sorted(runs)
    assert document["signer"]["owner"] == "Submitter"
    assert document["review"]["ran"] is True
    assert document["review"]["ok"] is True, document["review"]
    assert len(document["records"]) == 7
    assert document["alreadyPresent"] == []
    assert (
        result.stderr.strip()
        == f"next: git push REMOTE {document['branch']}, then open a pull request from it into main"
    )


def test_exit_0_text_report_fits_100_columns(cli: RunCli, registry: Registry, keys: Keys, tmp_path: Path) -> None:
    records = write_json(tmp_path / "records.json", chain_with_runs((1_204_000,)))
    result = cli("submit", records, "--key", keys.private("submitter"), "--registry", registry.root)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("branch     submit/")
    assert lines[1].startswith("commit     ")
    assert " on top of main " in lines[1]
    assert "runs (1): run, latency, GPU, implementation; definition / workload" in lines
    assert any(line.endswith("1.20 ms median  H200  torch_matmul") for line in lines)
    assert "    gemm_tiny / m2" in lines
    assert all(len(line) <= 100 for line in lines), lines


def test_the_submitted_run_verifies_with_kictl_verify(
    cli: RunCli, registry: Registry, keys: Keys, tmp_path: Path
) -> None:
    values = chain_with_runs()
    records = write_json(tmp_path / "records.json", values)
    submitted = cli("submit", records, "--key", keys.private("submitter"), "--registry", registry.root, "--json")
    assert submitted.exit_code == 0, submitted.output
    branch = json.loads(submitted.stdout)["branch"]
    for reference in (canon.record_digest(values[-1])[:15], values[-1]["metadata"]["name"]):
        elsewhere = cli("verify", reference, "--registry", registry.root)
        assert elsewhere.exit_code == 3, elsewhere.output
        assert f"it on branch {branch}: git switch {branch}" in elsewhere.stderr
    git.Repo(registry.root).git.checkout(branch)
    verified = cli("verify", canon.record_digest(values[-1])[:15], "--registry", registry.root, "--json")
    assert verified.exit_code == 0, verified.output
    report = json.loads(verified.stdout)
    assert report["submitted"] is True
    assert report["attestations"][0]["committed"] is True


def test_push_to_a_bare_repository(cli: RunCli, registry: Registry, keys: Keys, tmp_path: Path) -> None:
    bare = git.Repo.init(tmp_path / "remote.git", bare=True)
    git.Repo(registry.root).create_remote("origin", str(tmp_path / "remote.git"))
    records = write_json(tmp_path / "records.json", chain_with_runs())
    result = cli("submit", records, "--key", keys.private("submitter"), "--push", "origin", "--registry", registry.root)
    assert result.exit_code == 0, result.output
    branch = result.stdout.splitlines()[0].split()[-1]
    assert f"pushed     {branch} to origin" in result.stdout
    assert bare.commit(f"refs/heads/{branch}").hexsha == git.Repo(registry.root).commit(branch).hexsha
    assert f"next: open a pull request from {branch} into main (pushed to origin)" in result.stderr


def test_exit_1_nothing_new(cli: RunCli, registry: Registry, keys: Keys, tmp_path: Path) -> None:
    values = chain_with_runs()
    commit_records(registry, values)
    records = write_json(tmp_path / "records.json", values)
    result = cli("submit", records, "--key", keys.private("submitter"), "--registry", registry.root)
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("error: nothing to submit: all 6 record(s) are already in the registry")
    assert result.stdout == ""


def test_exit_1_key_not_in_the_trust_root(cli: RunCli, registry: Registry, keys: Keys, tmp_path: Path) -> None:
    records = write_json(tmp_path / "records.json", chain_with_runs())
    before = snapshot(registry)
    result = cli("submit", records, "--key", keys.private("stranger"), "--registry", registry.root)
    assert result.exit_code == 1, result.output
    assert "is not in the trust root (version 4)" in result.stderr
    assert snapshot(registry) == before


def test_exit_2_existing_branch(cli: RunCli, registry: Registry, keys: Keys, tmp_path: Path) -> None:
    git.Repo(registry.root).create_head("mine")
    records = write_json(tmp_path / "records.json", chain_with_runs())
    args = ("--key", keys.private("submitter"), "--branch", "mine", "--registry", registry.root)
    result = cli("submit", records, *args)
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        "error: branch mine exists already; kictl submit never moves a branch: pass --branch NAME "
        "or delete it (git branch -D mine)\n"
    )


def test_exit_2_missing_key_option(cli: RunCli, registry: Registry, tmp_path: Path) -> None:
    records = write_json(tmp_path / "records.json", chain_with_runs())
    result = cli("submit", records, "--registry", registry.root)
    assert result.exit_code == 2, result.output


def test_exit_3_incomplete_submission(cli: RunCli, registry: Registry, keys: Keys, tmp_path: Path) -> None:
    values = chain_with_runs()
    records = write_json(tmp_path / "records.json", values[2:])  # no definition, no workload
    before = snapshot(registry)
    result = cli("submit", records, "--key", keys.private("submitter"), "--registry", registry.root)
    assert result.exit_code == 3, result.output
    lines = result.stderr.splitlines()
    assert lines[0] == "error: the records do not make a complete submission (3 problem(s)); nothing was written"
    assert all("is neither in the input nor in the registry" in line for line in lines[1:])
    assert snapshot(registry) == before


def test_exit_3_invalid_record(cli: RunCli, registry: Registry, keys: Keys, tmp_path: Path) -> None:
    values = chain_with_runs()
    del values[-1]["spec"]["observedAt"]
    records = write_json(tmp_path / "records.json", values)
    result = cli("submit", records, "--key", keys.private("submitter"), "--registry", registry.root)
    assert result.exit_code == 3, result.output
    assert "observedAt: missing member" in result.stderr


def test_exit_4_dirty_working_tree(cli: RunCli, registry: Registry, keys: Keys, tmp_path: Path) -> None:
    (registry.root / "scratch.json").write_text("{}\n")
    records = write_json(tmp_path / "records.json", chain_with_runs())
    result = cli("submit", records, "--key", keys.private("submitter"), "--registry", registry.root)
    assert result.exit_code == 4, result.output
    assert result.stderr.splitlines()[1:] == ["  ?? scratch.json"]


def test_exit_5_key_with_loose_permissions(cli: RunCli, registry: Registry, keys: Keys, tmp_path: Path) -> None:
    loose = loose_copy(keys, "submitter", tmp_path / "keys")
    records = write_json(tmp_path / "records.json", chain_with_runs())
    before = snapshot(registry)
    result = cli("submit", records, "--key", loose, "--registry", registry.root)
    assert result.exit_code == 5, result.output
    assert "permissions 0644 are too open for a private key" in result.stderr
    assert snapshot(registry) == before


def test_help_states_the_exit_codes(cli: RunCli) -> None:
    result = cli("submit", "--help")
    assert result.exit_code == 0, result.output
    assert "Exit codes: 0 a branch was made" in " ".join(result.stdout.split())


def test_exit_5_no_git_identity_names_the_git_config_commands(
    cli: RunCli, registry: Registry, keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    with git.Repo(registry.root).config_writer() as config:
        config.set_value("user", "useConfigOnly", "true")
    before = snapshot(registry)
    records = bench_out(tmp_path / "out", chain_with_runs())
    result = cli("submit", records, "--key", keys.private("submitter"), "--registry", registry.root)
    assert result.exit_code == 5, result.output
    assert result.stderr.startswith("error: git has no identity to commit the submission with: set one with git config")
    assert "user.email" in result.stderr.splitlines()[0]
    assert snapshot(registry) == before

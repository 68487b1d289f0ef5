"""Tests of kictl.submit on real git repositories, real keys and real trust roots.

Every failure is made real (a record colliding with a published file, git
refusing the commit, a remote's hook rejecting the push, a key file with loose
permissions) and every test that fails checks that the checkout, the index,
the branches and the files are exactly as before.
"""

from __future__ import annotations

import copy
import os
import stat
from pathlib import Path

import git
import pytest

from kictl import canon, trust
from kictl.errors import CheckFailed, EnvError, RecordError, RegistryError, UsageError
from kictl.records import StoredRecord, parse_timestamp
from kictl.render import latency as latency_text
from kictl.store.inputs import read_record_inputs
from kictl.store.registry import Registry
from kictl.submit import (
    BRANCH_PREFIX,
    LocalReview,
    commit_message,
    local_review,
    plan_submission,
    submit,
)
from kictl.validate import validate_registry
from tests import factories
from tests.submit.conftest import (
    Keys,
    bench_out,
    chain_with_runs,
    commit_records,
    loose_copy,
    records_of,
    snapshot,
)


def _run_digests(values: list[dict[str, object]]) -> list[str]:
    return [canon.record_digest(value) for value in values if value["kind"] == "BenchmarkRun"]


def _changed(registry: Registry, base: str, head: str) -> dict[str, str]:
    return {change.path: change.status for change in registry.git.changed_files(base, head)}


def _unchanged(registry: Registry, before: dict[str, object]) -> None:
    after = snapshot(registry)
    assert after == before
    assert not [name for name in after["branches"] if name.startswith(BRANCH_PREFIX)]


# --------------------------------------------------------------------------- what a submission makes


def test_submit_makes_one_signed_commit_on_a_new_branch(registry: Registry, keys: Keys) -> None:
    values = chain_with_runs((12_500,))
    run_digest = _run_digests(values)[0]
    before = snapshot(registry)
    result = submit(registry, records_of(values), keys.private("submitter"))

    assert result.branch == BRANCH_PREFIX + canon.digest_hex(run_digest)[:12]
    assert result.base == before["head"]
    assert result.base_branch == "main"
    repo = git.Repo(registry.root)
    commit = repo.commit(result.branch)
    assert commit.hexsha == result.commit
    assert [parent.hexsha for parent in commit.parents] == [before["head"]]
    changed = _changed(registry, result.base, result.commit)
    assert set(changed.values()) == {"A"}
    assert len([path for path in changed if path.startswith("registry/records/")]) == 6
    attestations = [path for path in changed if path.startswith("registry/attestations/")]
    assert attestations == [item.path for item in result.attestations]
    assert attestations[0].startswith(f"registry/attestations/{canon.digest_hex(run_digest)[:2]}/")
    # The checkout is exactly as it was: same branch, same index, no file left behind.
    assert snapshot(registry) == before | {"branches": before["branches"] | {result.branch: result.commit}}
    # The message lists the run: definition, workload, implementation, GPU, latency with its statistic.
    assert commit.message.splitlines()[0] == "Submit 1 run of gemm_tiny on H200"
    assert "- gemm_tiny / m2 / torch_matmul / H200 / 12.5 µs median" in commit.message
    assert run_digest in commit.message
    assert result.review == local_review(registry, result.base, result.commit)


def test_the_submitted_run_verifies_on_its_branch(registry: Registry, keys: Keys) -> None:
    values = chain_with_runs((12_500,))
    result = submit(registry, records_of(values), keys.private("submitter"))
    registry.git.checkout(result.branch)
    report = trust.check_record(registry, _run_digests(values)[0])
    assert report.ok, report.failures
    assert report.trust.submitted
    assert [(a.predicate_type, a.committed, a.signers[0].keyid) for a in report.attestations] == [
        ("submission", True, keys.keyid("submitter"))
    ]
    assert validate_registry(registry).ok


def test_each_new_run_is_signed(registry: Registry, keys: Keys) -> None:
    values = chain_with_runs((12_500, 11_000, 13_750))
    runs = _run_digests(values)
    result = submit(registry, records_of(values), keys.private("submitter"))
    assert result.branch == BRANCH_PREFIX + canon.digest_hex(runs[0])[:12]
    assert [item.digest for item in result.attestations] == runs
    assert [line.latency_ns for line in result.runs] == [12_500, 11_000, 13_750]
    assert str(git.Repo(registry.root).commit(result.branch).message).startswith("Submit 3 runs of gemm_tiny on H200\n")
    registry.git.checkout(result.branch)
    for digest in runs:
        report = trust.check_record(registry, digest)
        assert report.ok, report.failures
        assert report.trust.submitted


def test_records_already_published_are_not_added_again(registry: Registry, keys: Keys) -> None:
    values = chain_with_runs((12_500,))
    commit_records(registry, values[:5])
    result = submit(registry, records_of(values), keys.private("submitter"))
    assert [item.kind for item in result.records] == ["BenchmarkRun"]
    assert sorted(record.kind for record in result.present) == sorted(value["kind"] for value in values[:5])
    assert len(_changed(registry, result.base, result.commit)) == 2  # the run and its attestation


def test_a_bench_out_folder_is_submitted(registry: Registry, keys: Keys, tmp_path: Path) -> None:
    values = chain_with_runs((9_000, 9_500))
    folder = bench_out(tmp_path / "out", values)
    result = submit(registry, read_record_inputs([folder]), keys.private("submitter"))
    assert len(result.attestations) == 2
    assert len(result.records) == 7


def test_message_and_branch_options(registry: Registry, keys: Keys) -> None:
    result = submit(
        registry,
        records_of(chain_with_runs()),
        keys.private("submitter"),
        branch="kernels/torch-matmul",
        message="Add torch_matmul on H200",
    )
    assert result.branch == "kernels/torch-matmul"
    text = git.Repo(registry.root).commit(result.branch).message
    assert text.splitlines()[0] == "Add torch_matmul on H200"
    assert "- gemm_tiny / m2 / torch_matmul / H200 / 12.5 µs median" in text


def test_records_without_runs_are_submitted_unsigned(registry: Registry, keys: Keys) -> None:
    values = chain_with_runs()[:3]
    result = submit(registry, records_of(values), keys.private("submitter"))
    assert result.branch == BRANCH_PREFIX + canon.digest_hex(canon.record_digest(values[0]))[:12]
    assert not result.attestations
    assert not result.runs
    assert result.message.splitlines()[0] == "Submit 3 record(s): 1 Definition, 1 Workload, 1 Implementation"


def test_a_detached_head_is_left_detached(registry: Registry, keys: Keys) -> None:
    repo = git.Repo(registry.root)
    repo.git.checkout("--detach", "HEAD")
    before = snapshot(registry)
    result = submit(registry, records_of(chain_with_runs()), keys.private("submitter"))
    assert result.base_branch is None
    assert result.notes == [f"HEAD is detached: the branch starts at {before['head'][:12]}"]
    after = snapshot(registry)
    assert after["head_ref"] is None
    assert after["head"] == before["head"]
    assert after["index"] == before["index"]


def test_a_failed_run_is_listed_with_its_status(registry: Registry, keys: Keys) -> None:
    values = chain_with_runs()
    failed = copy.deepcopy(values[-1])
    failed["spec"]["status"] = "incorrect_numerical"
    del failed["spec"]["timing"]
    failed["metadata"]["name"] = "run-failed"
    result = submit(registry, records_of([*values[:5], failed]), keys.private("submitter"), allow_failed=True)
    assert "- gemm_tiny / m2 / torch_matmul / H200 / incorrect_numerical" in result.message


def test_a_failed_run_is_refused_without_allow_failed(registry: Registry, keys: Keys) -> None:
    values = chain_with_runs()
    failed = copy.deepcopy(values[-1])
    failed["spec"]["status"] = "compile_error"
    del failed["spec"]["timing"]
    failed["metadata"]["name"] = "run-failed"
    before = snapshot(registry)
    with pytest.raises(CheckFailed, match=r"1 new run\(s\) did not pass \(compile_error\); pass --allow-failed"):
        submit(registry, records_of([*values[:5], failed]), keys.private("submitter"))
    assert snapshot(registry) == before


# --------------------------------------------------------------------------- refused before anything is written


def test_nothing_new_is_refused(registry: Registry, keys: Keys) -> None:
    values = chain_with_runs()
    commit_records(registry, values)
    before = snapshot(registry)
    with pytest.raises(CheckFailed, match=r"nothing to submit: all 6 record\(s\) are already in the registry"):
        submit(registry, records_of(values), keys.private("submitter"))
    _unchanged(registry, before)


def test_a_run_whose_implementation_is_nowhere_is_refused(registry: Registry, keys: Keys) -> None:
    values = chain_with_runs()
    implementation = canon.record_digest(values[2])
    before = snapshot(registry)
    with pytest.raises(RecordError, match="do not make a complete submission") as caught:
        submit(registry, records_of([values[0], values[1], values[3], values[4], values[5]]), keys.private("submitter"))
    assert caught.value.details == (
        f"BenchmarkRun run-12500 ({canon.record_digest(values[5])[:19]}): $.spec.implementationDigest: "
        f"{implementation} is neither in the input nor in the registry",
    )
    _unchanged(registry, before)


def test_a_reference_to_a_record_of_another_kind_is_refused(registry: Registry, keys: Keys) -> None:
    values = chain_with_runs()
    values[5]["spec"]["implementationDigest"] = canon.record_digest(values[3])
    with pytest.raises(RecordError) as caught:
        plan_submission(registry, records_of(values))
    assert caught.value.details[0].endswith("is a BenchmarkProtocol, not a Implementation")


def test_parts_of_different_definitions_are_refused(registry: Registry, keys: Keys) -> None:
    values = chain_with_runs()
    other = factories.definition(name="gemm_other", k=16)
    workload = factories.workload(canon.record_digest(other), m=2, name="m2-other")
    values[5]["spec"]["workloadDigest"] = canon.record_digest(workload)
    with pytest.raises(RecordError) as caught:
        plan_submission(registry, records_of([*values, other, workload]))
    assert "its parts belong to different definitions" in caught.value.details[0]


def test_a_digest_given_twice_with_other_metadata_is_refused(registry: Registry) -> None:
    values = chain_with_runs()
    retitled = copy.deepcopy(values[0])
    retitled["metadata"]["title"] = "Another title"
    with pytest.raises(RecordError) as caught:
        plan_submission(registry, records_of([*values, retitled]))
    assert caught.value.details == (
        f"Definition gemm_tiny ({canon.record_digest(values[0])[:19]}): given twice with different metadata",
    )


def test_a_workload_blob_missing_from_the_registry_is_refused(registry: Registry) -> None:
    values = chain_with_runs()
    blob = "sha256:" + "cd" * 32
    values[1]["spec"]["inputs"]["A"] = {"type": "blob", "digest": blob, "key": "A"}
    run = values[5]
    run["spec"]["workloadDigest"] = canon.record_digest(values[1])
    with pytest.raises(RecordError) as caught:
        plan_submission(registry, records_of(values))
    assert caught.value.details[0].endswith(f"$.spec.inputs.A.digest: no blob {blob} in the registry")


@pytest.mark.parametrize("change", ["untracked", "modified", "staged"])
def test_a_dirty_working_tree_is_refused(registry: Registry, keys: Keys, change: str) -> None:
    policy = registry.policy_path
    if change == "untracked":
        (registry.root / "notes.txt").write_text("draft\n")
    else:
        policy.write_bytes(policy.read_bytes().replace(b"\n}", b',\n  "x": 1\n}'))
        if change == "staged":
            git.Repo(registry.root).index.add(["registry/policy.json"])
    before = snapshot(registry)
    with pytest.raises(RegistryError, match="has uncommitted changes; commit or stash them") as caught:
        submit(registry, records_of(chain_with_runs()), keys.private("submitter"))
    assert any("notes.txt" in line or "policy.json" in line for line in caught.value.details)
    _unchanged(registry, before)


def test_a_registry_that_is_no_git_repository_is_refused(tmp_path: Path, keys: Keys) -> None:
    (tmp_path / "plain" / "registry").mkdir(parents=True)
    with pytest.raises(RegistryError, match="is not a git repository; a submission is a git branch"):
        submit(Registry(tmp_path / "plain"), records_of(chain_with_runs()), keys.private("submitter"))


def test_a_key_outside_the_trust_root_is_refused(registry: Registry, keys: Keys) -> None:
    before = snapshot(registry)
    with pytest.raises(CheckFailed, match=r"is not in the trust root \(version 4\)"):
        submit(registry, records_of(chain_with_runs()), keys.private("stranger"))
    _unchanged(registry, before)


def test_a_key_without_the_submitter_role_is_refused(registry: Registry, keys: Keys) -> None:
    before = snapshot(registry)
    with pytest.raises(CheckFailed, match=r"\(Verifier\) cannot sign submissions now: role: a submission needs"):
        submit(registry, records_of(chain_with_runs()), keys.private("verifier"))
    _unchanged(registry, before)


def test_a_retired_key_is_refused(registry: Registry, keys: Keys) -> None:
    trust.revoke_key(
        registry,
        keys.keyid("submitter"),
        reason="retired",
        keys=[trust.load_private_key(keys.private("maintainer"))],
        at=parse_timestamp("2025-06-01T00:00:00.000Z"),
    )
    registry.git.commit(["registry"], "retire the submitter")
    before = snapshot(registry)
    with pytest.raises(CheckFailed, match=r"was retired on 2025-06-01T00:00:00.000Z"):
        submit(registry, records_of(chain_with_runs()), keys.private("submitter"))
    _unchanged(registry, before)


def test_a_registry_whose_trust_root_has_no_keys_is_refused(empty_registry: Registry, keys: Keys) -> None:
    with pytest.raises(CheckFailed, match="the trust root lists no keys yet"):
        submit(empty_registry, records_of(chain_with_runs()), keys.private("submitter"))


def test_a_key_file_with_loose_permissions_is_refused(registry: Registry, keys: Keys, tmp_path: Path) -> None:
    loose = loose_copy(keys, "submitter", tmp_path / "loose")
    before = snapshot(registry)
    with pytest.raises(EnvError, match="permissions 0644 are too open for a private key"):
        submit(registry, records_of(chain_with_runs()), loose)
    _unchanged(registry, before)


def test_a_missing_key_file_is_refused(registry: Registry, tmp_path: Path) -> None:
    with pytest.raises(EnvError, match="no private key at"):
        submit(registry, records_of(chain_with_runs()), tmp_path / "nokey")


def test_an_existing_branch_is_refused(registry: Registry, keys: Keys) -> None:
    git.Repo(registry.root).create_head("taken")
    before = snapshot(registry)
    with pytest.raises(UsageError, match="branch taken exists already; kictl submit never moves a branch"):
        submit(registry, records_of(chain_with_runs()), keys.private("submitter"), branch="taken")
    _unchanged(registry, before)


def test_submitting_twice_refuses_the_second_branch(registry: Registry, keys: Keys) -> None:
    records = records_of(chain_with_runs())
    first = submit(registry, records, keys.private("submitter"))
    with pytest.raises(UsageError, match=f"branch {first.branch} exists already"):
        submit(registry, records, keys.private("submitter"))


@pytest.mark.parametrize("name", ["bad..name", "-x", "with space", "end.lock", "HEAD"])
def test_an_invalid_branch_name_is_refused(registry: Registry, keys: Keys, name: str) -> None:
    with pytest.raises(UsageError, match="is not a valid branch name"):
        submit(registry, records_of(chain_with_runs()), keys.private("submitter"), branch=name)


def test_an_unknown_remote_is_refused(registry: Registry, keys: Keys) -> None:
    before = snapshot(registry)
    with pytest.raises(UsageError, match=r"--push upstream: no such remote \(configured: none\)"):
        submit(registry, records_of(chain_with_runs()), keys.private("submitter"), push="upstream")
    _unchanged(registry, before)


# --------------------------------------------------------------------------- failures half-way leave nothing


def test_a_collision_late_in_the_batch_leaves_nothing_behind(registry: Registry, keys: Keys) -> None:
    values = chain_with_runs((12_500, 11_000))
    published = factories.definition(name="gemm_published", k=32)
    commit_records(registry, [published])
    retitled = copy.deepcopy(published)
    retitled["metadata"]["title"] = "Same spec, another title"
    before = snapshot(registry)
    # Six records are written before the seventh meets a published file with other bytes.
    with pytest.raises(RegistryError, match="is already published with other bytes"):
        submit(registry, records_of([*values, retitled]), keys.private("submitter"))
    _unchanged(registry, before)


def test_git_without_an_identity_says_how_to_set_one_and_leaves_nothing_behind(
    registry: Registry, keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 13: with no git identity submit failed without saying how to set one."""
    for name in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    with git.Repo(registry.root).config_writer() as config:
        config.set_value("user", "useConfigOnly", "true")
    before = snapshot(registry)
    with pytest.raises(EnvError, match="git has no identity") as caught:
        submit(registry, records_of(chain_with_runs((12_500, 11_000))), keys.private("submitter"))
    assert "git config user.name 'Your Name' && git config user.email" in caught.value.message
    assert caught.value.exit_code == 5
    _unchanged(registry, before)


def _no_new_runs(registry: Registry, base: str, head: str) -> LocalReview:
    """A reviewer with one real rule: a PR may not add BenchmarkRun records."""
    runs = [c.path for c in registry.git.changed_files(base, head) if c.path.startswith("registry/records/Benchmark")]
    runs = [path for path in runs if "/BenchmarkRun/" in path]
    if runs:
        return LocalReview(ran=True, ok=False, summary="fail: 1 lint", lints=tuple(f"{p}: no runs" for p in runs))
    return LocalReview(ran=True, ok=True, summary="pass: 0 lints")


def test_a_review_that_says_no_leaves_nothing_behind(registry: Registry, keys: Keys) -> None:
    before = snapshot(registry)
    with pytest.raises(CheckFailed, match=r"the local review says no \(fail: 1 lint\)") as caught:
        submit(registry, records_of(chain_with_runs()), keys.private("submitter"), review=_no_new_runs)
    assert caught.value.details[0].startswith("registry/records/BenchmarkRun/")
    _unchanged(registry, before)


def test_the_review_sees_the_submission_commit(registry: Registry, keys: Keys) -> None:
    seen: list[tuple[str, str, list[str]]] = []

    def reviewer(target: Registry, base: str, head: str) -> LocalReview:
        seen.append((base, head, sorted(c.path for c in target.git.changed_files(base, head))))
        return _no_new_runs(target, base, head)

    result = submit(registry, records_of(chain_with_runs()[:3]), keys.private("submitter"), review=reviewer)
    assert seen == [(result.base, result.commit, sorted(item.path for item in result.files))]
    assert result.review.summary == "pass: 0 lints"


def _bare(path: Path, *, reject: bool = False) -> git.Repo:
    bare = git.Repo.init(path, bare=True)
    if reject:
        hook = path / "hooks" / "pre-receive"
        hook.write_text("#!/bin/sh\necho 'registry: pushes are closed' >&2\nexit 1\n")
        hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    return bare


def test_push_sends_the_branch_to_a_remote(registry: Registry, keys: Keys, tmp_path: Path) -> None:
    bare = _bare(tmp_path / "remote.git")
    git.Repo(registry.root).create_remote("origin", str(tmp_path / "remote.git"))
    result = submit(registry, records_of(chain_with_runs()), keys.private("submitter"), push="origin")
    assert result.pushed_to == "origin"
    assert bare.commit(f"refs/heads/{result.branch}").hexsha == result.commit
    assert result.remotes == ["origin"]


def test_push_to_a_path(registry: Registry, keys: Keys, tmp_path: Path) -> None:
    bare = _bare(tmp_path / "remote.git")
    result = submit(
        registry, records_of(chain_with_runs()), keys.private("submitter"), push=str(tmp_path / "remote.git")
    )
    assert bare.commit(f"refs/heads/{result.branch}").hexsha == result.commit


def test_a_rejected_push_leaves_nothing_behind(registry: Registry, keys: Keys, tmp_path: Path) -> None:
    if os.name != "posix":
        pytest.skip("git hooks are shell scripts")
    bare = _bare(tmp_path / "remote.git", reject=True)
    before = snapshot(registry)
    with pytest.raises(RegistryError, match="git push failed"):
        submit(registry, records_of(chain_with_runs()), keys.private("submitter"), push=str(tmp_path / "remote.git"))
    _unchanged(registry, before)
    assert not bare.heads


# --------------------------------------------------------------------------- parts


def test_commit_message_lines(registry: Registry, keys: Keys) -> None:
    plan = plan_submission(registry, records_of(chain_with_runs((1_204_000, 950))))
    signer = trust.Signer(keyid="ab" * 32, owner="Sam", roles=("submitter",))
    text = commit_message(plan, signer)
    lines = text.splitlines()
    assert lines[0] == "Submit 2 runs of gemm_tiny on H200"
    assert "- gemm_tiny / m2 / torch_matmul / H200 / 1.20 ms median" in lines
    assert "- gemm_tiny / m2 / torch_matmul / H200 / 950 ns median" in lines
    assert "Submission attestations: 2, signed by Sam (key abababababab)." in lines
    assert all(len(line) <= 100 for line in lines)
    assert text.endswith("Made with kictl submit.\n")


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (0, "0 ns"),
        (812, "812 ns"),
        (12_500, "12.5 µs"),
        (123_456, "123 µs"),
        (1_204_000, "1.20 ms"),
        (2_100_000_000, "2.10 s"),
    ],
)
def test_latency_text(ns: int, text: str) -> None:
    assert latency_text(ns) == text


def test_the_local_review_is_kictl_review(registry: Registry) -> None:
    head = git.Repo(registry.root).head.commit.hexsha
    outcome = local_review(registry, head, head)
    assert (outcome.ran, outcome.ok) == (True, True)
    assert outcome.to_json()["summary"] == "pass: no changes between the merge base and the head"


def test_plan_counts_new_and_present(registry: Registry) -> None:
    values = chain_with_runs()
    commit_records(registry, values[:2])
    plan = plan_submission(registry, records_of(values + values[:1]))
    assert [r.kind for r in plan.present] == ["Definition", "Workload"]
    assert len(plan.new) == 4
    assert len(plan.runs) == 1
    assert isinstance(plan.new_runs[0], StoredRecord)

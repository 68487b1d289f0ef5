"""Hostile PRs (issue 13): file modes, trust-file copies, garbage names and bytes. Every failure is a lint naming
the file; nothing crashes (``run_review`` asserts no traceback and exit 0 or 1).
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import pytest

from kictl import canon
from tests.conftest import RunCli
from tests.review.conftest import Pr, envelope, envelope_path, record_path, run_review

ROOT = "registry/trust/root.json"


def _git_commit(pr: Pr, message: str) -> None:
    """Commit with git itself: gitpython's index cannot hold a non-UTF-8 path."""
    subprocess.run(["git", "-C", str(pr.root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(pr.root), "commit", "-q", "-m", message], check=True)


def _lints(reviewed: object) -> list[tuple[str, str, str]]:
    document = reviewed.document  # type: ignore[attr-defined]
    return [(lint["code"], lint["path"] or "", lint["message"]) for lint in document["lints"]]


def test_a_symlinked_record_is_a_lint(cli: RunCli, pr: Pr) -> None:
    run = pr.base.run_like(median_ns=45_000)
    path = record_path(run)
    (pr.root / path).parent.mkdir(parents=True, exist_ok=True)
    os.symlink("/etc/passwd", pr.root / path)
    pr.commit("a symlink where a record belongs")
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 1
    assert ("path-not-allowed", path) in [(code, where) for code, where, _ in _lints(reviewed)]
    [message] = [m for code, where, m in _lints(reviewed) if where == path]
    assert message.startswith("not a regular file: git mode 120000 (a symbolic link)")


def test_an_executable_definition_file_is_a_lint(cli: RunCli, pr: Pr) -> None:
    path = "definitions/gemm/gemm_n4096_k4096/definition.json"
    (pr.root / path).chmod(0o755)
    pr.repo.git.update_index("--chmod=+x", path)
    pr.repo.git.commit("-q", "-m", "chmod +x")
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 1
    assert [(code, where) for code, where, _ in _lints(reviewed)] == [("path-not-allowed", path)]
    assert "git mode 100755 (an executable file)" in _lints(reviewed)[0][2]


def test_a_byte_copy_of_the_current_root_as_the_next_version_is_a_lint(cli: RunCli, pr: Pr) -> None:
    current = (pr.root / ROOT).read_bytes()
    version = json.loads(current)["signed"]["version"]
    path = pr.write(f"registry/trust/{version + 1}.root.json", current)
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 1
    assert _lints(reviewed) == [
        ("trust-root-threshold", path, f"a byte copy of trust root version {version}, not a new version {version + 1}")
    ]


def test_garbage_never_crashes_the_review(cli: RunCli, pr: Pr) -> None:
    """A non-UTF-8 file name, a 700-deep JSON record, an envelope padded past 1 MiB, random bytes as a record."""
    run = pr.base.run_like(median_ns=45_000)
    deep = b"[" * 700 + b"]" * 700
    pr.write(record_path(run), deep)
    padded = envelope(run)
    padded["padding"] = "x" * (1024 * 1024 + 10)
    padded_path = pr.add_envelope(run, padded)
    other = pr.base.run_like(median_ns=46_000)
    pr.write(record_path(other), os.urandom(4096))
    raw_name = os.fsencode(pr.root / "registry/records") + b"/\xff\xfe-bad.json"
    with open(raw_name, "wb") as handle:
        handle.write(b"{}")
    _git_commit(pr, "garbage")
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 1
    lints = _lints(reviewed)
    paths = {where for _, where, _ in lints}
    assert record_path(run) in paths
    assert record_path(other) in paths
    assert padded_path in paths
    assert any("-bad.json" in where for where in paths), lints
    [(_, _, too_big)] = [lint for lint in lints if lint[1] == padded_path and "bytes;" in lint[2]]
    assert too_big.endswith("an envelope is at most 1048576 bytes (1 MiB)")
    assert all(message for _, _, message in lints)


@pytest.mark.slow
def test_an_oversized_blob_is_a_lint(cli: RunCli, pr: Pr) -> None:
    data = os.urandom(1024) * (65 * 1024)  # 65 MiB
    path = pr.add_blob(data)
    pr.commit("a huge blob")
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 1
    assert any(where == path and "a blob is at most" in message for _, where, message in _lints(reviewed))


def test_the_same_signed_statement_twice_is_one_submission(cli: RunCli, pr: Pr) -> None:
    """Re-adding a signed envelope under another name is a lint-free no-op for counts, never a crash."""
    run = pr.base.run_like(median_ns=45_000)
    pr.add_record(run)
    value = envelope(run)
    pr.add_envelope(run, value)
    twice = dict(value, signatures=value["signatures"] * 2)
    pr.add_envelope(run, twice)
    pr.commit()
    reviewed = run_review(cli, pr)
    assert "Traceback" not in reviewed.json_result.output
    assert envelope_path(run, twice) != envelope_path(run, value)
    assert canon.record_digest(run)


def test_git_sees_the_odd_name(pr: Pr) -> None:
    """The fixture of the garbage test really makes a non-UTF-8 path in git (the test is not vacuous)."""
    raw_name = os.fsencode(pr.root / "registry/records") + b"/\xff.json"
    with open(raw_name, "wb") as handle:
        handle.write(b"{}")
    _git_commit(pr, "an odd name")
    listed = subprocess.run(
        ["git", "-C", str(pr.root), "ls-files", "-z"], capture_output=True, check=True
    ).stdout.split(b"\0")
    assert b"registry/records/\xff.json" in listed


def _signed_run(pr: Pr, **changes: Any) -> str:
    run = pr.base.run_like(median_ns=45_000, **changes)
    path = pr.add_record(run)
    pr.add_envelope(run, envelope(run))
    return path


def test_a_run_of_another_definitions_implementation_is_a_lint(cli: RunCli, pr: Pr) -> None:
    from tests import factories

    stranger = factories.implementation(canon.record_digest(factories.definition()))
    pr.add_record(stranger)
    path = _signed_run(pr, implementationDigest=canon.record_digest(stranger))
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 1
    [(code, _where, message)] = [lint for lint in _lints(reviewed) if lint[1] == path]
    assert code == "inconsistent-run"
    assert "belongs to definition" in message


def test_a_workload_whose_axes_do_not_fit_is_a_lint_and_has_no_floor(cli: RunCli, pr: Pr) -> None:
    """Attack: a workload without its variable axis M (the floor cannot be computed) and a 1 ns run on it."""
    bogus = json.loads(json.dumps(pr.base.workloads["m128"]))
    bogus["metadata"]["name"] = "no_m"
    bogus["spec"]["axes"] = {"Q": 1}
    pr.add_record(bogus)
    run = pr.base.run_like(median_ns=1, workloadDigest=canon.record_digest(bogus))
    run["spec"]["timing"]["latencyNs"] = {"median": 1}
    path = pr.add_record(run)
    pr.add_envelope(run, envelope(run))
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 1
    codes = sorted(code for code, where, _ in _lints(reviewed) if where == path)
    assert codes == ["inconsistent-run", "no-floor"], reviewed.json_result.output
    [axes] = [m for code, where, m in _lints(reviewed) if where == path and code == "inconsistent-run"]
    assert "lacks M" in axes
    assert "sets Q" in axes

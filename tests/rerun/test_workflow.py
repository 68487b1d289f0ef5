"""registry-rerun.yml: zizmor finds nothing, and the key never meets submitted code, line by line."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

WORKFLOW = REPO_ROOT / ".github" / "workflows" / "registry-rerun.yml"


def _tool(name: str) -> str | None:
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name)


def _jobs() -> dict[str, str]:
    text = WORKFLOW.read_text()
    body = text.split("\njobs:\n", 1)[1]
    parts = re.split(r"^  ([a-z-]+):\n", body, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_zizmor_finds_nothing_even_as_an_auditor() -> None:
    zizmor = _tool("zizmor")
    if zizmor is None:
        if os.environ.get("CI"):
            pytest.fail("zizmor is not installed; it is a development dependency (pip install -e '.[dev]')")
        pytest.skip("zizmor is not installed")
    done = subprocess.run(
        [zizmor, "--offline", "--persona", "auditor", "--format", "plain", str(WORKFLOW)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No findings to report" in done.stdout, done.stdout
    ignores = re.findall(r"zizmor: ignore\[([a-z-]+)\]", WORKFLOW.read_text())
    assert ignores == ["dangerous-triggers", "self-hosted-runner"]


def test_actions_are_pinned_by_commit() -> None:
    uses = re.findall(r"^\s*(?:- )?uses: (\S+)(.*)$", WORKFLOW.read_text(), flags=re.M)
    assert len(uses) >= 6
    for action, comment in uses:
        assert re.fullmatch(r"[a-z-]+/[a-z-]+@[0-9a-f]{40}", action), action
        assert re.fullmatch(r" # v\d+\.\d+\.\d+", comment), (action, comment)


def test_started_only_by_the_rerun_label_or_by_hand() -> None:
    text = WORKFLOW.read_text()
    assert re.search(r"^on:\n  pull_request_target: .*\n    types: \[labeled\]\n  workflow_dispatch:\n", text, re.M)
    assert re.search(r"^permissions: \{\}$", text, re.M)
    for job in ("request", "rerun"):
        assert "if: github.event_name == 'workflow_dispatch' || github.event.label.name == 'rerun'" in _jobs()[job]


def test_the_request_is_made_with_the_key_before_the_gpu_job_and_carries_no_key() -> None:
    jobs = _jobs()
    request = jobs["request"]
    assert "runs-on: ubuntu-latest" in request
    assert "environment: rerun-signing" in request
    assert "attest request" in request
    assert "trap 'rm -f \"$key\"' EXIT" in request
    assert "path: request/" in request  # the request folder, never the key file ($RUNNER_TEMP)
    assert "cp -R tool/registry/trust pr/registry/trust" in request
    assert "needs: request" in jobs["rerun"]
    assert '--request "$RUNNER_TEMP/request/request.json"' in jobs["rerun"]


def test_the_gpu_job_has_no_secrets_and_no_permissions() -> None:
    job = _jobs()["rerun"]
    assert "self-hosted" in job
    assert "ephemeral" in job
    assert "    permissions: {}\n" in job
    assert "secrets." not in job
    assert "environment:" not in job
    assert "persist-credentials: false" in job
    assert "--out results" in job
    assert "attest" not in job
    assert "KICTL_VERIFIER_KEY" not in job


def test_the_signing_job_runs_no_code_from_the_pull_request() -> None:
    job = _jobs()["sign"]
    assert "runs-on: ubuntu-latest" in job
    assert "needs: [request, rerun]" in job
    assert "environment: rerun-signing" in job
    permissions = re.search(r"    permissions:\n((?:      .*\n)+)", job)
    assert permissions is not None
    granted = re.findall(r"^      ([a-z-]+): (\w+)", permissions.group(1), re.M)
    assert granted == [("contents", "read"), ("pull-requests", "write")]
    assert job.count("persist-credentials: false") == 2
    assert '"$RUNNER_TEMP/kictl/bin/pip" install --quiet ./tool' in job
    assert "./pr" not in job
    # the PR may not bring its own trust root or policy (its own verifier key, its own tolerance)
    assert "cp -R tool/registry/trust pr/registry/trust" in job
    assert "cp tool/registry/policy.json pr/registry/policy.json" in job
    assert "--require-verifier" in job
    assert "trap 'rm -f \"$key\"' EXIT" in job
    assert "(umask 077 && printf" in job
    # exactly what kictl reports writing is uploaded: a listing of the checkout is shaped by the PR's .gitignore
    assert '--written "$RUNNER_TEMP/written.txt"' in job
    assert "ls-files" not in job
    assert 'done < "$RUNNER_TEMP/written.txt"' in job
    # untrusted values reach the shell only through the environment
    for line in WORKFLOW.read_text().splitlines():
        if "${{" in line and not line.lstrip().startswith("#"):
            assert re.match(r"\s+(\w[\w-]*: \$\{\{ [^}]+\}\}.*|group: .*|name: .*|if: .*)$", line), line
    script = job.split("script: |", 1)[1]
    assert "${{" not in script

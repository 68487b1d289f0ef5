"""registry-comment.yml trusts a review run by what it ran, never by its name (issue 13).

Its github-script is run here under Node.js with GitHub's API replaced by a
recording fake, once for the honest run and once per attack: a workflow that
merely has the review's name, a run in another repository, a run of another
workflow id, a stale head commit, a PR from another repository, and a PR that
edits the review workflow itself.  Only the honest run may post a comment.
zizmor must stay clean and every action pinned by commit.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT

WORKFLOW = REPO_ROOT / ".github" / "workflows" / "registry-comment.yml"
REVIEW_PATH = ".github/workflows/registry-review.yml"
HEAD = "a" * 40
BASE = "b" * 40
REVIEW_WORKFLOW_ID = 4242
REVIEW_BLOB = "1" * 40

HARNESS = r"""
const fs = require("node:fs");
const scenario = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const script = fs.readFileSync(process.argv[3], "utf8");
const calls = [];
const outcome = { failed: null, calls };
const core = { setFailed: (message) => { outcome.failed = message; } };
const api = (name, answer) => async (args) => { calls.push({ name, args }); return { data: answer(args) }; };
const github = {
  rest: {
    actions: { getWorkflow: api("getWorkflow", (a) => scenario.workflows[a.workflow_id]) },
    pulls: { get: api("pulls.get", (a) => scenario.pulls[String(a.pull_number)]) },
    repos: {
      getContent: api("getContent", (a) => {
        const sha = scenario.contents[`${a.owner}/${a.repo}@${a.ref}:${a.path}`];
        if (sha === undefined) { throw new Error(`404 ${a.owner}/${a.repo}@${a.ref}:${a.path}`); }
        return { sha };
      }),
    },
    issues: {
      listComments: api("listComments", () => scenario.comments),
      createComment: api("createComment", () => ({})),
      updateComment: api("updateComment", () => ({})),
    },
  },
  paginate: async (method, args) => (await method(args)).data,
};
const context = { repo: { owner: "kernelindex", repo: "registry" }, payload: scenario.payload };
for (const [key, value] of Object.entries(scenario.env)) { process.env[key] = value; }
const AsyncFunction = Object.getPrototypeOf(async function () {}).constructor;
new AsyncFunction("github", "context", "core", "require", script)(github, context, core, require)
  .then(() => { process.stdout.write(JSON.stringify(outcome)); })
  .catch((error) => { outcome.failed = `threw: ${error.message}`; process.stdout.write(JSON.stringify(outcome)); });
"""


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI"):
            pytest.fail("node is not on PATH (GitHub's runners and this project's machines have it)")
        pytest.skip("node is not on PATH")
    return node


def _script() -> str:
    """The github-script body of the comment workflow, as GitHub runs it."""
    lines = WORKFLOW.read_text().splitlines()
    start = next(index for index, line in enumerate(lines) if line.strip() == "script: |")
    indent = len(lines[start]) - len(lines[start].lstrip()) + 2
    body = []
    for line in lines[start + 1 :]:
        if line.strip() and len(line) - len(line.lstrip()) < indent:
            break
        body.append(line)
    return textwrap.dedent("\n".join(body))


def _honest() -> dict[str, Any]:
    base = "kernelindex/registry"
    return {
        "payload": {
            "workflow_run": {
                "name": "registry review",
                "path": REVIEW_PATH,
                "workflow_id": REVIEW_WORKFLOW_ID,
                "event": "pull_request",
                "head_sha": HEAD,
                "repository": {"full_name": base},
                "head_repository": {"full_name": "contributor/registry"},
            }
        },
        "env": {"HEAD_SHA": HEAD},
        "pr_number": "17",
        "review": "### kictl review\n\nno lints\n",
        "workflows": {"registry-review.yml": {"id": REVIEW_WORKFLOW_ID, "path": REVIEW_PATH}},
        "pulls": {
            "17": {
                "head": {"sha": HEAD, "repo": {"full_name": "contributor/registry"}},
                "base": {"sha": BASE, "ref": "main"},
            }
        },
        "contents": {
            f"{base}@{BASE}:{REVIEW_PATH}": REVIEW_BLOB,
            f"contributor/registry@{HEAD}:{REVIEW_PATH}": REVIEW_BLOB,
        },
        "comments": [],
    }


def _run(tmp_path: Path, scenario: dict[str, Any]) -> dict[str, Any]:
    review = tmp_path / "kictl-review"
    review.mkdir(exist_ok=True)
    (review / "pr-number").write_text(scenario["pr_number"] + "\n")
    (review / "review.md").write_text(scenario["review"])
    scenario = {**scenario, "env": {**scenario["env"], "REVIEW_DIR": str(review)}}
    (tmp_path / "scenario.json").write_text(json.dumps(scenario))
    (tmp_path / "script.js").write_text(_script())
    (tmp_path / "harness.js").write_text(HARNESS)
    done = subprocess.run(
        [_node(), str(tmp_path / "harness.js"), str(tmp_path / "scenario.json"), str(tmp_path / "script.js")],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _posted(outcome: dict[str, Any]) -> list[str]:
    return [call["name"] for call in outcome["calls"] if call["name"] in ("createComment", "updateComment")]


def test_the_honest_review_run_posts_its_comment(tmp_path: Path) -> None:
    outcome = _run(tmp_path, _honest())
    assert outcome["failed"] is None
    [create] = [call for call in outcome["calls"] if call["name"] == "createComment"]
    assert create["args"]["issue_number"] == 17
    assert create["args"]["body"].startswith("<!-- kictl-review -->\n### kictl review")


def _attack(change: str) -> dict[str, Any]:
    scenario = _honest()
    run = scenario["payload"]["workflow_run"]
    pull = scenario["pulls"]["17"]
    if change == "a workflow merely named like the review":
        run.update(path=".github/workflows/evil.yml", workflow_id=999)
    elif change == "the review's path in another repository":
        run["repository"] = {"full_name": "contributor/registry"}
    elif change == "another workflow id at the review's path":
        run["workflow_id"] = 999
    elif change == "a push run of the review":
        run["event"] = "push"
    elif change == "a run at an older head commit":
        pull["head"]["sha"] = "c" * 40
    elif change == "a run whose head is not the job's":
        run["head_sha"] = "d" * 40
    elif change == "a PR from another repository than the run's":
        pull["head"]["repo"] = {"full_name": "someone-else/registry"}
    elif change == "a PR that edits the review workflow":
        scenario["contents"][f"contributor/registry@{HEAD}:{REVIEW_PATH}"] = "2" * 40
    elif change == "a PR that deletes the review workflow":
        del scenario["contents"][f"contributor/registry@{HEAD}:{REVIEW_PATH}"]
    elif change == "an artifact naming no pull request":
        scenario["pr_number"] = "17; rm -rf /"
    else:  # pragma: no cover - a typo in the parametrisation
        raise AssertionError(change)
    return scenario


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("a workflow merely named like the review", r'ran "\.github/workflows/evil\.yml", not'),
        ("the review's path in another repository", "is a pull_request run of contributor/registry"),
        ("another workflow id at the review's path", "is of workflow 999, not the review"),
        ("a push run of the review", "is a push run of kernelindex/registry"),
        ("a run at an older head commit", "is not at the reviewed commit"),
        ("a run whose head is not the job's", "head commit is not the one"),
        ("a PR from another repository than the run's", "does not come from the repository the run reviewed"),
        ("a PR that edits the review workflow", r"changes \.github/workflows/registry-review\.yml"),
        ("a PR that deletes the review workflow", "threw: 404"),
        ("an artifact naming no pull request", "names no pull request"),
    ],
)
def test_an_untrusted_run_posts_nothing(tmp_path: Path, change: str, reason: str) -> None:
    outcome = _run(tmp_path, _attack(change))
    assert outcome["failed"] is not None
    assert re.search(reason, outcome["failed"]), outcome["failed"]
    assert _posted(outcome) == []


def test_the_job_condition_names_the_review_by_path_and_repository() -> None:
    text = WORKFLOW.read_text()
    condition = re.search(r"^    if: >-\n((?:      .*\n)+)", text, re.M)
    assert condition is not None
    clauses = [line.strip().removeprefix("&& ") for line in condition.group(1).splitlines()]
    assert clauses == [
        "github.event.workflow_run.event == 'pull_request'",
        "github.event.workflow_run.conclusion != 'cancelled'",
        f"github.event.workflow_run.path == '{REVIEW_PATH}'",
        "github.event.workflow_run.repository.full_name == github.repository",
    ]
    assert (REPO_ROOT / REVIEW_PATH).is_file()
    assert re.search(r"^name: registry review$", (REPO_ROOT / REVIEW_PATH).read_text(), re.M)
    script = _script()
    assert "${{" not in script  # no expression is interpolated into the script
    assert f'const REVIEW_WORKFLOW = "{REVIEW_PATH}";' in script


def test_actions_stay_pinned_and_zizmor_stays_clean() -> None:
    text = WORKFLOW.read_text()
    uses = re.findall(r"^\s*(?:- )?uses: (\S+)(.*)$", text, flags=re.M)
    assert uses
    for action, comment in uses:
        assert re.fullmatch(r"[a-z-]+/[a-z-]+@[0-9a-f]{40}", action), action
        assert re.fullmatch(r" # v\d+\.\d+\.\d+", comment), (action, comment)
    beside = Path(sys.executable).parent / "zizmor"
    zizmor = str(beside) if beside.exists() else shutil.which("zizmor")
    if zizmor is None:
        if os.environ.get("CI"):
            pytest.fail("zizmor is not installed; it is a development dependency")
        pytest.skip("zizmor is not installed")
    done = subprocess.run(
        [zizmor, "--offline", "--format", "plain", str(WORKFLOW)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No findings to report" in done.stdout, done.stdout

"""`kictl review` on the command line: one test per exit code, the formats, --json-file, text width."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from kictl import canon
from tests.conftest import RunCli
from tests.review.conftest import Pr, envelope, record_path


def _pr_with_lints(pr: Pr) -> None:
    run = pr.base.run_like(median_ns=1_000)  # below its floor, signed: three lints and a new #1
    pr.add_record(run)
    pr.add_envelope(run, envelope(run))
    pr.write("tools/helper.py", b"print('data PRs carry no code')\n")
    raw = json.loads(json.dumps(pr.base.protocol))
    raw["metadata"]["title"] = "edited"
    pr.write(record_path(pr.base.protocol), canon.pretty_bytes(raw))
    pr.commit()


def test_exit_0_without_lints(cli: RunCli, pr: Pr) -> None:
    run = pr.base.run_like(median_ns=45_000)  # slower than the base's run of torch_matmul: no rank change
    pr.add_record(run)
    pr.add_envelope(run, envelope(run))
    pr.commit()
    result = cli("review", "--registry", pr.root, "--base", "main")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1] == "pass: 0 lints, 0 hints in 2 changed files"
    assert result.stderr == "review: pass: 0 lints, 0 hints in 2 changed files\n"


def test_exit_1_with_lints_and_text_fits_100_columns(cli: RunCli, pr: Pr) -> None:
    _pr_with_lints(pr)
    result = cli("review", "--registry", pr.root, "--base", "main")
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines()[-1] == "error: 3 lint(s): the PR cannot be merged as it is"
    lines = result.stdout.splitlines()
    assert lines[1] == "fail: 3 lints, 1 hint in 4 changed files"
    assert all(len(line) <= 100 for line in lines), [line for line in lines if len(line) > 100]
    assert "not checked:" not in lines
    section = lines[lines.index("lints:") + 1 : lines.index("hints:")]
    codes = [line.split()[0] for line in section if line.startswith("  ") and not line.startswith("    ")]
    assert codes == ["published-changed", "below-floor", "path-not-allowed"]


def test_json_and_json_file_agree(cli: RunCli, pr: Pr, tmp_path: Path) -> None:
    _pr_with_lints(pr)
    saved = tmp_path / "out" / "review.json"
    result = cli("review", "--registry", pr.root, "--base", "main", "--json", "--json-file", saved)
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    assert json.loads(saved.read_text()) == document
    assert document["ok"] is False
    assert document["base"]["ref"] == "main"
    assert document["head"]["commit"] == pr.repo.head.commit.hexsha
    markdown = cli("review", "--registry", pr.root, "--base", "main", "--format", "markdown", "--json-file", saved)
    assert markdown.exit_code == 1
    assert markdown.stdout.startswith("### kictl review fails: 3 lints, 1 hint in 4 changed files\n")
    assert json.loads(saved.read_text()) == document


def test_head_option_and_merge_base(cli: RunCli, pr: Pr) -> None:
    _pr_with_lints(pr)
    pr.repo.git.checkout("-q", "main")
    (pr.root / "registry" / "late.txt").write_text("on main after the PR branched\n")
    pr.repo.git.add("-A")
    pr.repo.git.commit("-q", "-m", "main moves on")
    result = cli("review", "--registry", pr.root, "--base", "main", "--head", "pr", "--json")
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    assert document["base"]["mergeBase"] != document["base"]["commit"]
    assert "registry/late.txt" not in [change["path"] for change in document["changes"]]
    assert len(document["changes"]) == 4


def test_same_revision_has_nothing_to_review(cli: RunCli, pr: Pr) -> None:
    result = cli("review", "--registry", pr.root, "--base", "main", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["summary"] == "pass: no changes between the merge base and the head"


def test_exit_2_on_usage(cli: RunCli, pr: Pr) -> None:
    missing = cli("review", "--registry", pr.root)
    assert missing.exit_code == 2, missing.output
    assert "--base" in missing.output
    clash = cli("review", "--registry", pr.root, "--base", "main", "--json", "--format", "markdown")
    assert clash.exit_code == 2, clash.output
    assert clash.stderr == "error: --json and --format markdown disagree; give one of them\n"


def test_exit_3_on_an_unknown_revision(cli: RunCli, pr: Pr) -> None:
    result = cli("review", "--registry", pr.root, "--base", "mian")
    assert result.exit_code == 3, result.output
    assert result.stderr.startswith("error: unknown revision 'mian'\nclosest known: main")


def test_exit_4_without_git(cli: RunCli, pr: Pr, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    shutil.copytree(pr.root / "registry", plain / "registry")
    result = cli("review", "--registry", plain, "--base", "main")
    assert result.exit_code == 4, result.output
    assert result.stderr == f"error: {plain} is not a git repository\n"
    unwritable = cli("review", "--registry", pr.root, "--base", "main", "--json-file", plain / "registry")
    assert unwritable.exit_code == 4, unwritable.output
    assert unwritable.stderr.startswith("error: --json-file: ")

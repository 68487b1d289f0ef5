"""Who may retract: one rule (``trust.may_retract``), the same for ``kictl review`` and every offline reader
(issue 41, class 6).

The attack: a key that merely co-signed a submission of someone else's run (in the same envelope, or in
the same commit) signs a retraction.  Review refuses it; ``leaderboard``, ``show`` and ``verify`` must
ignore it exactly as review does, after the pull request is merged.  The record's original submitter
(every key of its earliest valid submission together) or a maintainer may retract, and both review and
readers accept that.  Real keys, real DSSE envelopes, a real PR branch merged in real git.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kictl import canon, trust
from kictl.review import review
from kictl.trust._common import PAYLOAD_TYPE
from kictl.trust.dsse import sign_envelope
from tests.conftest import RunCli
from tests.trust.conftest import KeyFiles, Setup, at, commit_all, sign

REFUSED = "a retraction needs a maintainer or the record's submitter"


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout.strip()


def _envelope(setup: Setup, kind: str, predicate: dict[str, Any], keys: list[KeyFiles]) -> Path:
    """One envelope about the setup's run signed by every key of ``keys`` (a co-signed attestation)."""
    statement = trust.statement_for(setup.run, kind, predicate)
    envelope = sign_envelope(PAYLOAD_TYPE, canon.canonical_bytes(statement), [key.load() for key in keys])
    path = setup.registry.attestation_folder(setup.run.digest) / trust.envelope_name(envelope)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(canon.pretty_bytes(envelope))
    return path


def _submitted(setup: Setup, cosign: str) -> None:
    """The submitter's run, co-signed by the second submitter key (``community``), on the main line."""
    if cosign == "one envelope":
        _envelope(setup, "submission", {}, [setup.submitter, setup.community])
        commit_all(setup.registry, at("2025-07-01"), "submitted, co-signed")
    elif cosign == "one commit":
        sign(setup, setup.submitter)
        sign(setup, setup.community)
        commit_all(setup.registry, at("2025-07-01"), "submitted with a second submission")
    else:  # a later submission of someone else's run
        sign(setup, setup.submitter)
        commit_all(setup.registry, at("2025-07-01"), "submitted")
        sign(setup, setup.community)
        commit_all(setup.registry, at("2025-07-02"), "vouched for later")


def _retract_in_a_pr(setup: Setup, keys: list[KeyFiles]) -> tuple[list[tuple[str, str]], str]:
    """A PR adding a retraction signed by ``keys``: review's lints on it; then the PR is merged."""
    root = setup.registry.root
    base = _git(root, "rev-parse", "--abbrev-ref", "HEAD")
    _git(root, "checkout", "-q", "-b", "pr")
    path = _envelope(setup, "retraction", {"reason": "not a fair run"}, keys)
    commit_all(setup.registry, at("2025-08-01"), "retract")
    report = review(setup.registry, base, "pr")
    relative = setup.registry.relative(path)
    lints = [(finding.code, finding.message) for finding in report.lints if finding.path == relative]
    _git(root, "checkout", "-q", base)
    _git(root, "merge", "-q", "--no-ff", "-m", "merge the retraction", "pr")
    _git(root, "branch", "-q", "-D", "pr")
    return lints, relative


def _offline(cli: RunCli, setup: Setup) -> tuple[bool, bool, list[str]]:
    """What ``verify``, ``show`` and ``leaderboard`` make of the run: (retracted, shown retracted, board runs)."""
    root = setup.registry.root
    verified = cli("verify", setup.run.digest, "--registry", root, "--json")
    assert verified.exit_code in (0, 1), verified.output
    shown = cli("show", setup.run.digest, "--registry", root, "--json")
    assert shown.exit_code == 0, shown.output
    board = cli("leaderboard", "scale_h8", "--workload", "n64", "--registry", root, "--json")
    assert board.exit_code == 0, board.output
    runs = [row["run"] for group in json.loads(board.stdout) for row in group["rows"]]
    return json.loads(verified.stdout)["retracted"], json.loads(shown.stdout)["evidence"]["retracted"], runs


@pytest.mark.parametrize("cosign", ["one envelope", "one commit", "later"])
def test_a_co_signers_retraction_is_refused_by_review_and_ignored_by_every_reader(
    cli: RunCli, setup: Setup, cosign: str
) -> None:
    _submitted(setup, cosign)
    lints, _ = _retract_in_a_pr(setup, [setup.community])
    assert [code for code, _ in lints] == ["bad-attestation"]
    assert REFUSED in lints[0][1]
    assert _offline(cli, setup) == (False, False, [setup.run.digest])


@pytest.mark.parametrize(("cosign", "who"), [("one envelope", "both"), ("one commit", "both"), ("later", "submitter")])
def test_the_original_submitters_retraction_passes_review_and_every_reader_honours_it(
    cli: RunCli, setup: Setup, cosign: str, who: str
) -> None:
    """The original submitter retracts: every key of the earliest submission together, as review judged it."""
    _submitted(setup, cosign)
    keys = [setup.submitter, setup.community] if who == "both" else [setup.submitter]
    lints, _ = _retract_in_a_pr(setup, keys)
    assert lints == []
    assert _offline(cli, setup) == (True, True, [])


def test_one_of_two_co_submitters_cannot_retract_alone(cli: RunCli, setup: Setup) -> None:
    """Keys that submitted together own the run together: one of them alone is refused, by review and readers."""
    _submitted(setup, "one envelope")
    lints, _ = _retract_in_a_pr(setup, [setup.submitter])
    assert [code for code, _ in lints] == ["bad-attestation"]
    assert _offline(cli, setup) == (False, False, [setup.run.digest])


def test_a_maintainers_retraction_passes_everywhere(cli: RunCli, setup: Setup) -> None:
    _submitted(setup, "one envelope")
    lints, _ = _retract_in_a_pr(setup, [setup.maintainer])
    assert lints == []
    assert _offline(cli, setup)[0] is True


def test_may_retract_is_the_rule() -> None:
    def signer(keyid: str, *roles: str) -> trust.Signer:
        return trust.Signer(keyid=keyid, owner=keyid, roles=roles)

    owners = {"a", "b"}
    assert trust.may_retract([signer("m", "maintainer")], owners)
    assert trust.may_retract([signer("a", "submitter"), signer("b", "submitter")], owners)
    assert not trust.may_retract([signer("a", "submitter")], owners)
    assert not trust.may_retract([signer("c", "submitter")], set())  # no valid submission: no owner
    assert not trust.may_retract([], set())


def test_review_leaderboards_leave_out_a_run_retracted_in_the_pr(setup: Setup) -> None:
    """Review's leaderboards apply the same rule as ``kictl leaderboard``: a validly retracted run is no new #1."""
    from tests.trust.conftest import build_records

    sign(setup, setup.submitter)
    commit_all(setup.registry, at("2025-07-01"), "submitted")
    root = setup.registry.root
    base = _git(root, "rev-parse", "--abbrev-ref", "HEAD")
    _git(root, "checkout", "-q", "-b", "pr")
    faster = build_records(500_000, tag="b")
    setup.registry.add([faster.implementation, faster.run])
    trust.sign_record(setup.registry, faster.run.digest, setup.submitter.private)
    commit_all(setup.registry, at("2025-08-01"), "a faster run")
    assert "new-first" in [hint.code for hint in review(setup.registry, base, "pr").hints]
    trust.sign_record(
        setup.registry, faster.run.digest, setup.submitter.private, predicate_type="retraction",
        predicate={"reason": "measured the wrong build"},
    )  # fmt: skip
    commit_all(setup.registry, at("2025-08-02"), "retracted in the same PR")
    report = review(setup.registry, base, "pr")
    assert [finding.code for finding in report.lints] == []
    assert "new-first" not in [hint.code for hint in report.hints]

"""A run's standing in one call (issue 44): level, retraction, verifier reruns, advisories and held-out verdict,
each with its reason, and the bulk form agrees with the one-run form and with every reader's older question.

Real keys, real DSSE envelopes, real git repositories (tests/trust/conftest.py, tests/advisories/conftest.py).
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from kictl import standing, trust
from kictl.errors import CheckFailed
from kictl.index.query import QueryIndex
from tests.advisories.conftest import ID, Board, publish
from tests.trust.conftest import Setup, add_records, at, build_records, commit_all, rerun_predicate, sign


def test_an_unsigned_run_stands_unsigned_with_its_reason(setup: Setup) -> None:
    found = standing.standing(setup.registry, setup.run.digest)
    assert (found.level, found.retracted, found.reruns, found.rerun_of) == ("unsigned", False, (), ())
    assert found.level_reason == "no valid submission signature by a key of the trust root"
    assert (found.advisories, found.held_out) == ((), None)
    assert found.held_out_reason == "no verifier's rerun checked it on held-out shapes"
    assert found.ranked


def test_a_verified_run_names_its_rerun_and_the_rerun_names_it(setup: Setup) -> None:
    mine = build_records(1_010_000, tag="a").run  # the verifier's own run: same chain, another latency
    add_records(setup.registry, [mine])
    sign(setup, setup.submitter)
    sign(setup, setup.verifier, "rerun", rerun_predicate(1.01, run_digest=mine.digest))
    commit_all(setup.registry, at("2026-03-01"))
    both = standing.standings(setup.registry, [setup.run.digest, mine.digest])
    original, rerun = both[setup.run.digest], both[mine.digest]
    assert original.level == "verified"
    assert original.level_reason == "1 verifier rerun(s) agree within the policy's rerunTolerance"
    assert original.reruns == (mine.digest,)
    assert original.rerun_of == ()
    assert original.ranked
    assert rerun.rerun_of == (setup.run.digest,)
    assert not rerun.ranked
    assert both.reruns == frozenset({mine.digest})
    # the one-run form and the older questions agree with the bulk form
    assert standing.standing(setup.registry, setup.run.digest) == original
    assert standing.verifier_reruns(setup.registry) == {mine.digest: (setup.run.digest,)}
    assert standing.ranking_trust(setup.registry, [setup.run.digest, mine.digest]) == (
        {setup.run.digest: "verified", mine.digest: "unsigned"},
        {mine.digest},
    )
    assert json.loads(json.dumps(original.to_json()))["reruns"] == [mine.digest]


def test_a_community_rerun_names_no_rerun_and_a_disagreeing_verifier_disputes(setup: Setup) -> None:
    mine = build_records(3_000_000, tag="a").run
    add_records(setup.registry, [mine])
    sign(setup, setup.submitter)
    sign(setup, setup.community, "rerun", rerun_predicate(1.0, run_digest=mine.digest))
    found = standing.standing(setup.registry, setup.run.digest)
    assert (found.level, found.reruns, found.trust.community_reruns) == ("reported", (), 1)
    assert standing.verifier_rerun_runs(setup.registry) == set()
    sign(setup, setup.verifier, "rerun", rerun_predicate(3.0, "disagrees", run_digest=mine.digest))
    found = standing.standing(setup.registry, setup.run.digest)
    assert found.level == "disputed"
    assert found.level_reason == "a verifier's rerun disagrees with its claim or failed"
    assert found.reruns == (mine.digest,)  # a disputing rerun is still the verifier's rerun: never ranked


def test_a_retraction_counts_only_by_the_runs_own_submitter(setup: Setup) -> None:
    sign(setup, setup.submitter)
    sign(setup, setup.community, "retraction", {"reason": "not mine to retract"})
    assert not standing.standing(setup.registry, setup.run.digest).retracted
    sign(setup, setup.submitter, "retraction", {"reason": "the timer was wrong"})
    found = standing.standing(setup.registry, setup.run.digest)
    assert found.retracted
    assert not found.ranked
    assert found.retraction_reason == "a valid retraction by a maintainer or the run's own submitters"
    _, left_out = standing.ranking_trust(setup.registry, [setup.run.digest])
    assert left_out == {setup.run.digest}


def test_a_forged_rerun_by_a_stranger_names_nothing(setup: Setup) -> None:
    mine = build_records(1_000_000, tag="b").run
    add_records(setup.registry, [mine])
    sign(setup, setup.stranger, "rerun", rerun_predicate(1.0, run_digest=mine.digest))
    assert standing.standing(setup.registry, setup.run.digest).reruns == ()
    assert standing.standing(setup.registry, mine.digest).rerun_of == ()
    assert standing.verifier_rerun_runs(setup.registry) == set()


def test_a_tampered_run_stands_unsigned_whatever_its_envelopes(setup: Setup) -> None:
    sign(setup, setup.verifier, "rerun", rerun_predicate(1.0))
    assert standing.standing(setup.registry, setup.run.digest).level == "verified"
    path = setup.registry.record_path("BenchmarkRun", setup.run.digest)
    path.write_bytes(path.read_bytes().replace(b'"passed"', b'"failed"'))
    assert standing.evidence_levels(setup.registry, [setup.run.digest]) == {setup.run.digest: "unsigned"}


def test_a_run_without_kept_samples_stands_reported_at_best_and_says_why(setup: Setup) -> None:
    sign(setup, setup.verifier, "rerun", rerun_predicate(1.0))
    with QueryIndex.open(setup.registry) as index:
        (facts,) = index.runs([setup.run.digest])
    bare = dataclasses.replace(facts, samples=0)  # as the index says of a run that keeps none
    found = standing.standings(setup.registry, [bare])[setup.run.digest]
    assert (found.trust.level, found.level) == ("verified", "reported")
    assert found.level_reason.endswith("the run keeps no samples, so it stands as reported at best")
    assert standing.standings(setup.registry, [facts])[setup.run.digest].level == "verified"


def test_standing_needs_a_valid_trust_root(setup: Setup) -> None:
    sign(setup, setup.verifier, "rerun", rerun_predicate(1.0))
    (setup.registry.trust_dir / "4.root.json").unlink()
    with pytest.raises(CheckFailed, match="lacks trust root version 4"):
        standing.standing(setup.registry, setup.run.digest)


def test_advisory_marks_and_the_rerun_that_clears_one(board: Board) -> None:
    setup = board.setup
    old = board.runs["old"]
    board.registry.add([board.runs["rerun_fixed"]])
    publish(board, setup.maintainer)
    commit_all(board.registry, at("2025-08-01"), "advisory")
    digests = [run.digest for run in board.runs.values() if run.digest != board.runs["rerun_old"].digest]
    before = standing.standings(board.registry, digests)
    assert before[old.digest].advisories == (ID,)
    assert before[board.runs["fixed"].digest].advisories == ()
    assert before.marks.advisories[ID].id == ID
    rerun = {"runDigest": board.runs["rerun_fixed"].digest, "verdict": "agrees", "ratio": 1.01}
    trust.sign_record(board.registry, old.digest, setup.verifier.private, predicate_type="rerun", predicate=rerun)
    commit_all(board.registry, at("2025-08-02"), "a rerun by the fixed harness")
    after = standing.standing(board.registry, old.digest)
    assert after.advisories == ()
    assert after.cleared == ((ID, board.runs["rerun_fixed"].digest),)
    assert after.reruns == (board.runs["rerun_fixed"].digest,)
    assert standing.record_marks(board.registry, old.digest).cleared[old.digest] == after.cleared

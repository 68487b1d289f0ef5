"""A verifier's own rerun is evidence about a run, never a contender on the leaderboard (issue 14 follow-up)."""

from __future__ import annotations

from kictl import rank
from kictl.index.query import QueryIndex
from kictl.policy import Policy
from tests.trust.conftest import Setup, add_records, build_records, rerun_predicate, sign


def test_the_verifiers_rerun_run_is_left_out_of_the_leaderboard(setup: Setup) -> None:
    mine = build_records(1_010_000, tag="a").run  # same chain, another latency: the verifier's own run
    assert mine.digest != setup.run.digest
    add_records(setup.registry, [mine])
    with QueryIndex.open(setup.registry) as index:
        runs = index.runs_of_workload(setup.records.workload.digest)
        assert {run.digest for run in runs} == {setup.run.digest, mine.digest}
        assert len(rank.leave_out_verifier_reruns(setup.registry, runs)) == 2  # no attestation yet
    sign(setup, setup.submitter)
    sign(setup, setup.verifier, "rerun", rerun_predicate(1.01, run_digest=mine.digest))
    with QueryIndex.open(setup.registry) as index:
        runs = index.runs_of_workload(setup.records.workload.digest)
        kept = rank.leave_out_verifier_reruns(setup.registry, runs)
        assert [run.digest for run in kept] == [setup.run.digest]
        board = rank.workload_leaderboard(
            index, setup.records.definition.digest, setup.records.workload.digest, policy=Policy()
        )
    digests = {row.run.digest for group in board.groups for row in group.rows}
    assert mine.digest not in digests

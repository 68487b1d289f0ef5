"""``rank.stale_groups``: the groups a submitter of some runs could refresh (issue 7's stale-group hint).

Groups of the same definition and GPU as the given runs, any workload, whose
rank-1 rows are all stale (observed more than ``staleAfterDays`` before now).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from kictl.index.query import QueryIndex
from kictl.policy import Policy
from kictl.rank.diffs import stale_groups
from kictl.records import StoredRecord
from tests.rank.conftest import World, days_ago

POLICY = Policy()  # stale after 365 days


def _stale(world: World, runs: Sequence[StoredRecord], **kwargs: object) -> list[tuple[str, str, str]]:
    index = QueryIndex.open(world.registry)
    try:
        groups = stale_groups(index, [run.digest for run in runs], policy=POLICY, now=datetime.now(UTC), **kwargs)  # type: ignore[arg-type]
        return [(group.workload_name, group.key.gpu, group.rows[0].implementation_label) for group in groups]
    finally:
        index.close()


def test_groups_of_the_same_definition_and_gpu_whose_first_is_stale(
    world: World, basic: dict[str, StoredRecord]
) -> None:
    b, p, h200, b200 = basic["m1"], basic["protocol"], basic["h200"], basic["b200"]
    world.run(b, basic["slow"], p, h200, 9_000, observed=days_ago(400))  # m1 on H200: stale #1
    world.run(b, basic["fast"], p, b200, 5_000, observed=days_ago(500))  # m1 on B200: another GPU
    fresh = world.run(basic["m128"], basic["fast"], p, h200, 20_000)  # the "PR's" run
    world.commit("runs")
    assert _stale(world, [fresh]) == [("m1", "H200", "slow")]


def test_a_fresh_run_anywhere_in_the_first_rank_keeps_the_group_fresh(
    world: World, basic: dict[str, StoredRecord]
) -> None:
    b, p, h200 = basic["m1"], basic["protocol"], basic["h200"]
    world.run(b, basic["slow"], p, h200, 9_000, observed=days_ago(400))
    world.run(b, basic["fast"], p, h200, 9_050, observed=days_ago(3))  # ties within 2%: shares rank 1
    world.run(b, basic["flashinfer"], p, h200, 30_000, observed=days_ago(600))  # stale, but #3
    fresh = world.run(basic["m128"], basic["fast"], p, h200, 20_000)
    world.commit("runs")
    assert _stale(world, [fresh]) == []


def test_a_stale_first_the_runs_themselves_hold_is_reported(world: World, basic: dict[str, StoredRecord]) -> None:
    old = world.run(basic["m1"], basic["slow"], basic["protocol"], basic["h200"], 9_000, observed=days_ago(400))
    world.commit("an old result")
    assert _stale(world, [old]) == [("m1", "H200", "slow")]


def test_evidence_comes_from_the_given_source(world: World, basic: dict[str, StoredRecord]) -> None:
    b, p, h200 = basic["m1"], basic["protocol"], basic["h200"]
    disputed = world.run(b, basic["slow"], p, h200, 9_000, observed=days_ago(400))
    world.run(b, basic["fast"], p, h200, 12_000, observed=days_ago(2))
    fresh = world.run(basic["m128"], basic["fast"], p, h200, 20_000)
    world.commit("runs")
    asked: list[list[str]] = []

    def source(digests: Sequence[str]) -> Mapping[str, str]:
        asked.append(list(digests))
        return {digest: "disputed" if digest == disputed.digest else "reported" for digest in digests}

    assert _stale(world, [fresh]) == [("m1", "H200", "slow")]
    assert _stale(world, [fresh], evidence_of=source) == []  # the disputed #1 leaves: a fresh run leads
    assert len(asked) == 1
    assert disputed.digest in asked[0]

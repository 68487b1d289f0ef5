"""Ranking rules of DESIGN §6 on small real registries (kictl.rank over kictl.index)."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

import pytest

from kictl.errors import NotFoundError, UsageError
from kictl.index.parsing import quantile
from kictl.index.query import QueryIndex
from kictl.policy import Policy
from kictl.rank import GroupKey, comparison_key, definition_leaderboard, rank_group, workload_leaderboard
from kictl.rank.diffs import diff_records
from kictl.records import StoredRecord
from tests.rank.conftest import World, days_ago

POLICY = Policy()


def test_comparison_key_is_the_digest_of_the_four_values() -> None:
    workload = "sha256:" + "ab" * 32
    # JCS of an object of four ASCII strings: keys sorted, no spaces
    expected_bytes = json.dumps(
        {"comparabilityFamily": "fam", "gpu": "H200", "primaryStatistic": "median", "workloadDigest": workload},
        separators=(",", ":"),
        sort_keys=True,
    ).encode()
    expected = "sha256:" + hashlib.sha256(expected_bytes).hexdigest()
    assert comparison_key(workload, "H200", "fam", "median") == expected
    assert GroupKey(workload, "H200", "fam", "median").digest == expected
    assert comparison_key(workload, "H200", "fam", "mean") != expected


def test_quantile_interpolates_like_numpy() -> None:
    assert quantile([10, 20, 30, 40, 50], 0.1) == pytest.approx(14.0)
    assert quantile([10, 20, 30, 40, 50], 0.9) == pytest.approx(46.0)
    assert quantile([7], 0.9) == 7


def _board(world: World, workload: str = "m128", gpu: str | None = "H200", **kwargs: object):  # type: ignore[no-untyped-def]
    index = QueryIndex.open(world.registry)
    try:
        return workload_leaderboard(index, "gemm_n64_k64", workload, policy=POLICY, gpu=gpu, **kwargs)  # type: ignore[arg-type]
    finally:
        index.close()


def _names(board) -> list[tuple[int, str]]:  # type: ignore[no-untyped-def]
    (group,) = board.groups
    return [(row.rank, row.implementation_label) for row in group.rows]


def test_failed_runs_are_excluded_and_each_implementation_keeps_its_best(
    world: World, basic: dict[str, StoredRecord]
) -> None:
    b = basic
    world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 10_000)
    world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 9_000)  # its best
    world.run(b["m128"], b["slow"], b["protocol"], b["h200"], 5_000, status="incorrect_numerical")
    world.run(b["m128"], b["slow"], b["protocol"], b["h200"], None, status="runtime_error")
    world.run(b["m128"], b["slow"], b["protocol"], b["h200"], 20_000)
    world.commit("runs")
    board = _board(world)
    (group,) = board.groups
    assert _names(board) == [(1, "fast"), (2, "slow")]
    assert group.rows[0].latency_ns == 9_000
    assert group.excluded == {"notPassed": 2, "evidence": 0, "notBest": 1}
    assert group.rows[1].times_vs_first == pytest.approx(20_000 / 9_000)


def test_ties_within_the_policy_tolerance_share_a_rank(world: World, basic: dict[str, StoredRecord]) -> None:
    b = basic
    # no samples, no p10/p90: the policy's tieTolerance (0.02 × latency) is each run's noise
    world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 10_000)
    world.run(b["m128"], b["slow"], b["protocol"], b["h200"], 10_150)  # 1.5 % slower: a tie
    world.run(b["m128"], b["flashinfer"], b["protocol"], b["h200"], 10_500)  # 5 % slower than #1: not a tie
    world.commit("runs")
    board = _board(world)
    assert _names(board) == [(1, "fast"), (1, "slow"), (3, "flashinfer_wrapper_abc123")]
    (group,) = board.groups
    assert [row.tied for row in group.rows] == [False, True, False]


def test_ties_judged_from_samples_spread(world: World, basic: dict[str, StoredRecord]) -> None:
    b = basic
    wide = list(range(9_000, 11_001, 100))  # p10 9200, p90 10800: noise 800 ns
    tight = [10_500] * 20  # noise 0
    world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 10_000, samples=wide)
    world.run(b["m128"], b["slow"], b["protocol"], b["h200"], 10_500, samples=tight)  # 500 ns apart < 800: tie
    world.commit("runs")
    assert _names(_board(world)) == [(1, "fast"), (1, "slow")]


def test_tight_samples_separate_what_the_policy_would_tie(world: World, basic: dict[str, StoredRecord]) -> None:
    b = basic
    world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 10_000, samples=[9_990, 10_000, 10_010] * 5)
    world.run(b["m128"], b["slow"], b["protocol"], b["h200"], 10_100, samples=[10_090, 10_100, 10_110] * 5)
    world.commit("runs")
    # 1 % apart would tie under the 2 % policy tolerance; the samples say the noise is 8 ns
    assert _names(_board(world)) == [(1, "fast"), (2, "slow")]


def test_ties_from_p10_p90_without_samples(world: World, basic: dict[str, StoredRecord]) -> None:
    b = basic
    world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 10_000, p10=9_900, p90=10_100)  # noise 100
    world.run(b["m128"], b["slow"], b["protocol"], b["h200"], 10_090, p10=10_080, p90=10_100)  # noise 10
    world.run(b["m128"], b["flashinfer"], b["protocol"], b["h200"], 10_101, p10=10_100, p90=10_102)
    world.commit("runs")
    # slow is 90 ns behind (<= 100: tie); flashinfer 101 ns behind the leader: a rank of its own
    assert _names(_board(world)) == [(1, "fast"), (1, "slow"), (3, "flashinfer_wrapper_abc123")]


def test_ties_are_judged_against_the_rank_leader(world: World, basic: dict[str, StoredRecord]) -> None:
    b = basic
    world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 10_000)
    world.run(b["m128"], b["slow"], b["protocol"], b["h200"], 10_190)  # ties with fast (<= 2 % of 10190)
    world.run(b["m128"], b["flashinfer"], b["protocol"], b["h200"], 10_380)  # ties with slow, not with fast
    world.commit("runs")
    assert _names(_board(world)) == [(1, "fast"), (1, "slow"), (3, "flashinfer_wrapper_abc123")]


def test_stale_runs_are_flagged_by_the_policy_window(world: World, basic: dict[str, StoredRecord]) -> None:
    b = basic
    world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 10_000, observed=days_ago(400))
    world.run(b["m128"], b["slow"], b["protocol"], b["h200"], 12_000, observed=days_ago(10))
    world.commit("runs")
    (group,) = _board(world).groups
    assert [(row.implementation_label, row.stale) for row in group.rows] == [("fast", True), ("slow", False)]
    # a shorter window makes the second one stale too
    index = QueryIndex.open(world.registry)
    with index:
        short = Policy(stale_after_days=5)
        (group,) = workload_leaderboard(index, "gemm_n64_k64", "m128", policy=short).groups
    assert all(row.stale for row in group.rows)


def test_gpus_are_kept_apart(world: World, basic: dict[str, StoredRecord]) -> None:
    b = basic
    world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 10_000)
    world.run(b["m128"], b["slow"], b["protocol"], b["b200"], 7_000)
    world.commit("runs")
    board = _board(world, gpu=None)
    assert [(g.key.gpu, [r.implementation_label for r in g.rows]) for g in board.groups] == [
        ("B200", ["slow"]),
        ("H200", ["fast"]),
    ]
    assert len({g.comparison_key for g in board.groups}) == 2


def test_different_primary_statistics_never_mix(world: World, basic: dict[str, StoredRecord]) -> None:
    b = basic
    mean_protocol = world.protocol(statistic="mean")
    world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 10_000, statistic="median")
    world.run(b["m128"], b["slow"], mean_protocol, b["h200"], 8_000, statistic="mean")
    world.commit("runs")
    board = _board(world)
    assert sorted((g.key.statistic, [r.implementation_label for r in g.rows]) for g in board.groups) == [
        ("mean", ["slow"]),
        ("median", ["fast"]),
    ]


def test_different_comparability_families_never_mix(world: World, basic: dict[str, StoredRecord]) -> None:
    b = basic
    other = world.protocol(family="flashinfer_bench_trace")
    world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 10_000)
    world.run(b["m128"], b["slow"], other, b["h200"], 8_000)
    world.commit("runs")
    assert len(_board(world).groups) == 2


def test_run_below_the_floor_is_flagged(world: World, basic: dict[str, StoredRecord]) -> None:
    b = basic
    # M=128: 40,960 bytes over 4.8 TB/s = 8.53 ns on the H200
    world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 5)
    world.run(b["m128"], b["slow"], b["protocol"], b["h200"], 5_000)
    world.commit("runs")
    (group,) = _board(world).groups
    assert group.floor is not None
    assert group.floor.floor_ns == pytest.approx(40_960 / 4.8e12 * 1e9)
    assert [(row.implementation_label, row.below_floor) for row in group.rows] == [("fast", True), ("slow", False)]
    index = QueryIndex.open(world.registry)
    with index:
        summary = definition_leaderboard(index, "gemm_n64_k64", policy=POLICY)
    (board,) = summary.boards
    (record,) = board.records
    assert record.leader.below_floor is True


def test_evidence_is_an_input_and_filters(world: World, basic: dict[str, StoredRecord]) -> None:
    b = basic
    # kept samples: a run without them is reported at best (test_derived.py)
    fast = world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 10_000, samples=[10_000] * 5)
    slow = world.run(b["m128"], b["slow"], b["protocol"], b["h200"], 12_000, samples=[12_000] * 5)
    world.commit("runs")
    evidence = {fast.digest: "disputed", slow.digest: "verified"}
    # the default board shows the disputed run, labelled, after every undisputed one, however fast it claims to be
    assert _names(_board(world, evidence=evidence)) == [(1, "slow"), (2, "fast")]
    assert _names(_board(world, evidence=evidence, min_evidence="disputed")) == [(1, "slow"), (2, "fast")]
    assert _names(_board(world, evidence=evidence, min_evidence="unsigned")) == [(1, "slow")]
    assert _names(_board(world, evidence=evidence, min_evidence="verified")) == [(1, "slow")]
    (group,) = _board(world, evidence=evidence).groups
    assert [row.evidence for row in group.rows] == ["verified", "disputed"]
    assert group.rows[1].times_vs_first < 1  # x vs #1 is against the undisputed #1
    # without the trust module every run is reported
    (group,) = _board(world).groups
    assert {row.evidence for row in group.rows} == {"unsigned"}
    with pytest.raises(UsageError, match="unknown evidence level 'gold'"):
        _board(world, min_evidence="gold")


def test_two_implementations_whose_names_fold_together_carry_their_digests(
    world: World, basic: dict[str, StoredRecord]
) -> None:
    b = basic
    twin = world.implementation(b["definition"], "FAST", content="# another body\ndef run(A, B):\n    return A @ B.T\n")
    world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 10_000)
    world.run(b["m128"], twin, b["protocol"], b["h200"], 20_000)
    world.run(b["m128"], b["slow"], b["protocol"], b["h200"], 30_000)
    world.commit("runs")
    labels = [label for _, label in _names(_board(world))]
    assert labels == [
        f"fast@{b['fast'].digest[7:19]}",
        f"FAST@{twin.digest[7:19]}",
        "slow",
    ]


def test_speedup_over_the_reference(world: World, basic: dict[str, StoredRecord]) -> None:
    b = basic
    world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 10_000)
    world.run(b["m128"], b["reference"], b["protocol"], b["h200"], 50_000)
    world.run(b["m1"], b["fast"], b["protocol"], b["h200"], 1_000, reference_ms=0.004)  # source says 4 µs
    world.commit("runs")
    (group,) = _board(world).groups
    assert group.reference_ns == 50_000
    assert [(row.implementation_label, row.speedup_over_reference) for row in group.rows] == [
        ("fast", 5.0),
        ("reference", 1.0),
    ]
    (group,) = _board(world, workload="m1").groups
    assert group.rows[0].speedup_over_reference == pytest.approx(4.0)
    assert group.rows[0].speedup_source == "sourceNative"


def test_definition_summary_coverage_wins_geomean_and_challenges(world: World, basic: dict[str, StoredRecord]) -> None:
    b = basic
    fi = b["flashinfer"]
    world.run(b["m1"], fi, b["protocol"], b["h200"], 1_000)
    world.run(b["m1"], b["fast"], b["protocol"], b["h200"], 500)
    world.run(b["m128"], fi, b["protocol"], b["h200"], 10_000)
    world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 20_000)
    world.run(b["m128"], b["slow"], b["protocol"], b["h200"], 40_000)
    world.commit("runs")
    index = QueryIndex.open(world.registry)
    with index:
        summary = definition_leaderboard(index, "gemm_n64_k64", policy=POLICY, now=datetime.now(UTC))
    assert summary.baseline is not None
    assert (summary.baseline.name, summary.baseline.source) == ("flashinfer_wrapper_abc123", "flashinfer")
    (board,) = summary.boards
    assert board.gpu == "H200"
    assert [(r.group.workload_name, r.leader.implementation_label, r.baseline_unbeaten) for r in board.records] == [
        ("m1", "fast", False),
        ("m128", "flashinfer_wrapper_abc123", True),
    ]
    standings = {s.name: s for s in board.implementations}
    assert (standings["fast"].covered, standings["fast"].wins) == (2, 1)
    # geometric mean of 1000/500 = 2 and 10000/20000 = 0.5 is 1
    assert standings["fast"].geomean_speedup == pytest.approx(1.0)
    assert standings["slow"].geomean_speedup == pytest.approx(0.25)
    assert standings["slow"].covered == 1
    assert standings["flashinfer_wrapper_abc123"].geomean_speedup == pytest.approx(1.0)
    assert "B200" in summary.challenges
    assert "H200" not in summary.challenges


def test_policy_names_the_baseline(world: World, basic: dict[str, StoredRecord]) -> None:
    b = basic
    world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 10_000)
    world.run(b["m128"], b["slow"], b["protocol"], b["h200"], 30_000)
    world.commit("runs")
    policy = Policy(baselines={"gemm_n64_k64": "slow"})
    index = QueryIndex.open(world.registry)
    with index:
        summary = definition_leaderboard(index, "gemm_n64_k64", policy=policy)
    assert summary.baseline is not None
    assert (summary.baseline.name, summary.baseline.source) == ("slow", "policy")
    standings = {s.name: s.geomean_speedup for s in summary.boards[0].implementations}
    assert standings == {"fast": pytest.approx(3.0), "slow": pytest.approx(1.0)}


def test_unknown_names_say_the_closest(world: World, basic: dict[str, StoredRecord]) -> None:
    world.commit("records")
    index = QueryIndex.open(world.registry)
    with index:
        with pytest.raises(NotFoundError, match="no definition named or digested 'gemm_n64_k46'") as caught:
            definition_leaderboard(index, "gemm_n64_k46", policy=POLICY)
        assert "closest known: gemm_n64_k64" in caught.value.diagnostics()
        with pytest.raises(NotFoundError, match="no workload named or digested 'm12'") as caught:
            workload_leaderboard(index, "gemm_n64_k64", "m12", policy=POLICY)
        assert "m128" in caught.value.diagnostics()
        with pytest.raises(UsageError, match="unknown GPU 'H2000'") as usage:
            definition_leaderboard(index, "gemm_n64_k64", policy=POLICY, gpu="H2000")
        assert "H200" in usage.value.diagnostics()


def test_rank_group_refuses_runs_of_another_group(world: World, basic: dict[str, StoredRecord]) -> None:
    b = basic
    world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 10_000)
    world.commit("runs")
    index = QueryIndex.open(world.registry)
    with index:
        runs = index.runs_of_definition(b["definition"].digest)
    key = GroupKey(b["m1"].digest, "H200", "kictl-cuda-events", "median")
    with pytest.raises(ValueError, match="is not in group"):
        rank_group(key, runs, policy=POLICY, evidence={}, now=datetime.now(UTC))


def test_diff_of_two_runs_of_one_group(world: World, basic: dict[str, StoredRecord]) -> None:
    b = basic
    one = world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 10_000)
    two = world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 10_100)
    three = world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 12_000)
    other_gpu = world.run(b["m128"], b["fast"], b["protocol"], b["b200"], 12_000)
    world.commit("runs")
    index = QueryIndex.open(world.registry)
    with index:
        close = diff_records(index, one.digest, two.digest, policy=POLICY)
        far = diff_records(index, one.digest, three.digest, policy=POLICY)
        apart = diff_records(index, one.digest, other_gpu.digest, policy=POLICY)
        same = diff_records(index, one.digest, one.digest, policy=POLICY)
    assert close.same_group is True
    assert close.latency_ratio == pytest.approx(1.01)
    assert close.exceeds_noise is False
    assert far.exceeds_noise is True
    paths = {change.path for change in far.changes}
    assert "$.spec.timing.latencyNs.median" in paths
    assert "$.metadata.name" in paths
    assert apart.same_group is False
    assert apart.latency_ratio is None
    assert "$.spec.environmentDigest" in {change.path for change in apart.changes}
    assert same.equal
    assert not far.equal


def test_reference_latencies_from_the_source_make_the_reference_the_baseline(
    world: World, basic: dict[str, StoredRecord]
) -> None:
    b = basic
    # an imported harness reports each run's own reference latency; no reference run is in the registry
    world.run(b["m1"], b["fast"], b["protocol"], b["h200"], 1_000, reference_ms=0.004)
    world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 10_000, reference_ms=0.01)
    world.run(b["m128"], b["slow"], b["protocol"], b["h200"], 20_000, reference_ms=0.01)
    world.commit("runs")
    index = QueryIndex.open(world.registry)
    with index:
        summary = definition_leaderboard(index, "gemm_n64_k64", policy=POLICY)
    assert summary.baseline is not None
    assert (summary.baseline.name, summary.baseline.source) == ("reference", "reference")
    standings = {s.name: s for s in summary.boards[0].implementations}
    # fast: 4× on m1, 1× on m128; slow: 0.5× on m128
    assert standings["fast"].geomean_speedup == pytest.approx(2.0)
    assert standings["fast"].speedup_workloads == 2
    assert standings["slow"].geomean_speedup == pytest.approx(0.5)
    assert all(record.baseline_unbeaten is None for record in summary.boards[0].records)


def test_a_unique_label_prefix_names_a_workload(world: World, basic: dict[str, StoredRecord]) -> None:
    definition = basic["definition"]
    uuid_like = world.workload(definition, "547e0ce5-e484-4e0c-8b38-f153fb7ce6d4", 7)
    world.workload(definition, "547e0ce5-ffff-4e0c-8b38-000000000000", 9)
    world.commit("records")
    index = QueryIndex.open(world.registry)
    with index:
        assert index.resolve_workload(definition.digest, "547e0ce5-e484").digest == uuid_like.digest
        with pytest.raises(NotFoundError, match="no workload named or digested '547e0ce5-'"):
            index.resolve_workload(definition.digest, "547e0ce5-")  # two labels start so

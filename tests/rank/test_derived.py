"""Derived, never stated (issue 41): every reader takes a run's figures from its kept samples (kictl.derived).

A record states its statistics beside the samples they come from; whoever wrote it chose the statistics. A run
stating a median of 250 µs whose own samples have a median of 517 µs must rank as 517 µs, behind an honest
420 µs run, and say so wherever it is shown; a run that keeps no samples ranks as reported at best, with a note.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kictl import derived
from kictl.bench.worker.timing import median_relative_error, summarize
from kictl.index.query import QueryIndex
from kictl.policy import Policy
from kictl.rank import workload_leaderboard
from kictl.records import BenchmarkRunSpec, EnergyTrial, LatencyNs, RunEnergy, StoredRecord, Timing, load_record_file
from tests.conftest import REPO_ROOT, RunCli
from tests.rank.conftest import World

HONEST = [400_000, 410_000, 420_000, 430_000, 440_000] * 4  # median 420 µs
LIAR = [500_000, 510_000, 517_000, 530_000, 540_000] * 4  # median 517 µs, stated 250 µs


def _liar_and_honest(world: World, b: dict[str, StoredRecord]) -> tuple[StoredRecord, StoredRecord]:
    liar = world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 250_000, samples=LIAR)
    honest = world.run(b["m128"], b["slow"], b["protocol"], b["h200"], 420_000, samples=HONEST)
    world.commit("a run whose median contradicts its samples, and an honest one")
    return liar, honest


def _json(cli: RunCli, *args: str) -> Any:
    result = cli(*args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_median_that_contradicts_its_samples_ranks_by_its_samples(
    cli: RunCli, world: World, basic: dict[str, StoredRecord]
) -> None:
    liar, honest = _liar_and_honest(world, basic)
    root = str(world.registry.root)
    board = _json(
        cli, "leaderboard", "gemm_n64_k64", "--workload", "m128", "--gpu", "H200", "--registry", root, "--json"
    )
    (group,) = board
    rows = [(row["rank"], row["run"], row["latencyNs"]) for row in group["rows"]]
    assert rows == [(1, honest.digest, 420_000), (2, liar.digest, 517_000)]
    text = cli("leaderboard", "gemm_n64_k64", "--workload", "m128", "--gpu", "H200", "--registry", root)
    assert text.exit_code == 0, text.output
    assert "250 µs" not in text.stdout
    assert "517 µs" in text.stdout
    # kictl diff of the two runs reads the same figures
    diff = cli("diff", honest.digest, liar.digest, "--registry", root)
    assert diff.stdout.splitlines()[0].startswith("median 420 µs → 517 µs"), diff.stdout


def test_show_says_where_the_figure_comes_from_and_what_the_record_contradicts(
    cli: RunCli, world: World, basic: dict[str, StoredRecord]
) -> None:
    liar, honest = _liar_and_honest(world, basic)
    root = str(world.registry.root)
    text = cli("show", liar.digest, "--registry", root)
    assert "timing: median 517 µs, derived from 20 kept samples" in text.stdout
    assert "CONTRADICTS ITS SAMPLES (timing-contradicts-samples): median stated 250 µs" in text.stdout
    clean = cli("show", honest.digest, "--registry", root)
    assert "timing: median 420 µs, derived from 20 kept samples" in clean.stdout
    assert "CONTRADICTS" not in clean.stdout
    spec = liar.model.spec
    assert isinstance(spec, BenchmarkRunSpec)
    timing = (derived.run_figures_json(spec) or {})["timing"]
    assert isinstance(timing, dict)
    assert timing["latencyNs"]["median"] == 517_000
    assert {"statistic": "median", "stated": 250_000, "derived": 517_000} in timing["contradictions"]


def test_a_run_without_samples_ranks_as_reported_at_best_with_the_note(
    cli: RunCli, world: World, basic: dict[str, StoredRecord]
) -> None:
    b = basic
    stated = world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 300_000)  # imported: a figure, no samples
    kept = world.run(b["m128"], b["slow"], b["protocol"], b["h200"], 420_000, samples=HONEST)
    world.commit("a run that keeps no samples")
    evidence = {stated.digest: "verified", kept.digest: "verified"}
    with QueryIndex.open(world.registry) as index:
        board = workload_leaderboard(index, "gemm_n64_k64", "m128", policy=Policy(), gpu="H200", evidence=evidence)
        (group,) = board.groups
        rows = {row.run.digest: row for row in group.rows}
        assert rows[stated.digest].evidence == "reported"
        assert rows[stated.digest].note == derived.NO_SAMPLES_NOTE
        assert rows[stated.digest].to_json()["samplesKept"] == 0
        assert rows[kept.digest].evidence == "verified"
        assert rows[kept.digest].note is None
        assert [row.run.digest for row in group.rows] == [stated.digest, kept.digest]  # it ranks, labelled
        strict = workload_leaderboard(
            index, "gemm_n64_k64", "m128", policy=Policy(), gpu="H200", evidence=evidence, min_evidence="verified"
        )
        (only,) = strict.groups
        assert [row.run.digest for row in only.rows] == [kept.digest]
    text = cli("leaderboard", "gemm_n64_k64", "--workload", "m128", "--gpu", "H200", "--registry", world.registry.root)
    assert text.exit_code == 0, text.output
    assert "no samples" in text.stdout
    assert "ranks as reported at best" in " ".join(text.stdout.split())
    show = cli("show", stated.digest, "--registry", world.registry.root)
    assert "as stated (no samples kept" in show.stdout


@pytest.mark.parametrize("statistic", ["mean", "median", "min", "max", "p10", "p90", "stdev"])
def test_only_an_integer_rounding_is_allowed(statistic: str) -> None:
    samples = (1_000, 1_003, 1_010, 1_020, 1_021, 1_050, 1_090, 1_200)
    truth = summarize(samples)
    for offset, contradicts in ((0, False), (1, False), (-1, False), (2, True), (-2, True)):
        latency = {**truth, statistic: truth[statistic] + offset}
        timing = Timing(latency_ns=LatencyNs(**latency), samples=samples, primary_statistic="median")
        found = derived.timing_figures(timing)
        assert [item.what for item in found.contradictions] == ([statistic] if contradicts else []), offset
        assert found.statistics == truth  # readers always see the derived figures


def test_every_bundled_run_is_what_its_samples_give() -> None:
    """No honest run of the bundled registry (made by kictl bench) is flagged: the method is the bench's own."""
    paths = sorted((REPO_ROOT / "registry" / "records" / "BenchmarkRun").rglob("*.json"))
    checked = 0
    for path in paths:
        spec = load_record_file(path.read_bytes(), source=path.name)[0].model.spec
        timing = getattr(spec, "timing", None)
        if timing is not None:
            figures = derived.timing_figures(timing)
            assert figures.contradictions == (), (path.name, figures.contradictions)
            checked += figures.from_samples
        energy = getattr(spec, "energy", None)
        if energy is not None:
            assert derived.failed_checks(derived.energy_consistency(energy)) == [], path.name
    assert checked == len(paths) > 50


def test_a_median_relative_error_its_samples_do_not_give_is_a_contradiction() -> None:
    samples = (1_000, 1_003, 1_010, 1_020, 1_021, 1_050, 1_090, 1_200)
    truth = summarize(samples)
    own = round(median_relative_error(samples) or 0.0, 6)
    for stated, contradicts in ((own, False), (own + 1e-7, False), (0.001, True)):
        timing = Timing(
            latency_ns=LatencyNs(**truth), samples=samples, primary_statistic="median", median_relative_error=stated
        )
        found = derived.timing_figures(timing).contradictions
        assert [item.what for item in found] == (["medianRelativeError"] if contradicts else []), stated


def _energy(board_watts: float, idle_watts: float, stated: float | None = None) -> RunEnergy:
    """Three identical trials of 100 calls of 200 µs; ``stated`` replaces the run's joules per call alone."""
    per_call = 200_000.0
    joules = max(0.0, board_watts - idle_watts) * per_call / 1e9
    board = board_watts * per_call / 1e9
    trial = EnergyTrial(
        calls=100, loop_ns=20_000_000, joules_per_call=joules, board_joules_per_call=board, board_watts=board_watts,
        idle_watts=idle_watts, window_ms=700.0, counter_steps=8, uncertainty=0.004,
    )  # fmt: skip
    figure = stated if stated is not None else joules
    return RunEnergy(
        counter="nvmlDeviceGetTotalEnergyConsumption", joules_per_call=figure, board_joules_per_call=board,
        average_watts=board_watts, idle_watts=idle_watts, ns_per_call=200_000, spread=0.0, counter_period_ms=100.0,
        counter_period_range_ms=(97.0, 103.0), counter_unit_millijoules=1, uncertainty=0.004,
        power_limit_milliwatts=700_000, trials=(trial, trial, trial),
    )  # fmt: skip


def test_energy_figures_are_the_trials_and_a_claim_off_by_ten_to_the_five_is_named() -> None:
    honest = _energy(600.0, 150.0)
    assert derived.failed_checks(derived.energy_checks(honest, None)) == []
    assert derived.energy_figures(honest).joules_per_call == pytest.approx(0.09)
    claim = _energy(600.0, 150.0, stated=1e-6)
    checks = derived.energy_checks(claim, None)
    assert derived.failed_checks(checks) == ["energyFromTrials", "energyPowerTimesTime"]
    assert "joulesPerCall stated 1e-06 J, derived 0.09 J" in checks["energyFromTrials"]["detail"]
    assert derived.energy_figures(claim).joules_per_call == pytest.approx(0.09)  # what every reader uses
    spec = BenchmarkRunSpec(
        status="passed",
        timing=Timing(latency_ns=LatencyNs(median=200_000), samples=(200_000,) * 5, primary_statistic="median"),
        observed_at="2026-12-01T00:00:00.000Z",
        workload_digest="sha256:" + "1" * 64,
        implementation_digest="sha256:" + "2" * 64,
        protocol_digest="sha256:" + "3" * 64,
        environment_digest="sha256:" + "4" * 64,
        energy=claim,
    )
    lines = derived.run_figures_lines(spec)
    assert lines[1] == "energy: 0.09 J per call above idle, derived from 3 trial(s)' watts × time"
    assert lines[2].startswith("  CONTRADICTS ITSELF (energy-contradicts-trials): energyFromTrials: joulesPerCall")
    idle = derived.energy_bounds(_energy(150.0, 150.0), None)
    assert idle["energyAboveIdle"]["result"] == "failed"

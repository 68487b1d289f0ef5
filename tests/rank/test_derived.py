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
from kictl.index import QueryIndex
from kictl.policy import Policy
from kictl.rank import workload_leaderboard
from kictl.records import LatencyNs, StoredRecord, Timing, load_record_file
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
    document = _json(cli, "show", liar.digest, "--registry", root, "--json")
    timing = document["derived"]["timing"]
    assert timing["latencyNs"]["median"] == 517_000
    assert timing["source"] == "samples"
    assert {"statistic": "median", "stated": 250_000, "derived": 517_000} in timing["contradictions"]
    text = cli("show", liar.digest, "--registry", root)
    assert "timing: median 517 µs, derived from 20 kept samples" in text.stdout
    assert "CONTRADICTS ITS SAMPLES (timing-contradicts-samples): median stated 250 µs" in text.stdout
    clean = _json(cli, "show", honest.digest, "--registry", root, "--json")
    assert clean["derived"]["timing"]["contradictions"] == []


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

"""Output that explains itself (issue 30): legends, the reference standing in for a missing baseline,
workloads labelled and sorted by the axes that tell them apart, whole names off a terminal, citations
that carry the GPU, figure, statistic and submitter."""

from __future__ import annotations

import json

import pytest

from kictl import render
from kictl.cli.rank import GROUP_LEGEND, SUMMARY_LEGEND
from kictl.index.facts import WorkloadFacts
from kictl.index.query import QueryIndex
from kictl.policy import Policy
from kictl.rank import axes_label, definition_leaderboard, distinguishing_axes
from kictl.records import StoredRecord
from tests.conftest import RunCli
from tests.rank.conftest import World

POLICY = Policy()


def _facts(name: str, **axes: int) -> WorkloadFacts:
    return WorkloadFacts(digest=f"sha256:{name}", name=name, definition="d", axes=axes)


def test_the_axes_that_tell_workloads_apart() -> None:
    decode = [
        _facts("b1_kv73", batch_size=1, len_indptr=2, num_kv_indices=73),
        _facts("b1_kv4096", batch_size=1, len_indptr=2, num_kv_indices=4096),
        _facts("b8x", batch_size=8, len_indptr=9, num_kv_indices=4096),
    ]
    # batch_size tells two groups apart; len_indptr adds nothing; num_kv_indices finishes the job
    assert distinguishing_axes(decode) == ("batch_size", "num_kv_indices")
    assert axes_label(decode[1], ("batch_size", "num_kv_indices")) == "batch_size=1 num_kv_indices=4096"
    uuids = [_facts("547e0ce5-e484", M=8192), _facts("0a1b2c3d-ffff", M=1)]
    assert distinguishing_axes(uuids) == ("M",)
    assert distinguishing_axes(uuids[:1]) == ()
    assert distinguishing_axes([]) == ()


def test_a_table_cuts_names_only_to_fit_a_terminal() -> None:
    rows = [["a-very-long-implementation-name-that-goes-on", "1.00 µs"]]
    whole = render.table(["implementation", "latency"], rows, cut=(0,), width=None)
    assert rows[0][0] in whole[2]
    narrow = render.table(["implementation", "latency"], rows, cut=(0,), width=30)
    assert all(len(line) <= 30 for line in narrow)
    assert narrow[2].startswith("a-very-long-imp…") or "…" in narrow[2]
    assert "1.00 µs" in narrow[2]  # only the name column is cut
    roomy = render.table(["implementation", "latency"], rows, cut=(0,), width=200)
    assert rows[0][0] in roomy[2]


@pytest.fixture
def uuid_world(world: World, basic: dict[str, StoredRecord]) -> dict[str, StoredRecord]:
    """Imported-style workloads named by uuids, in an order their names do not give; CPU runs only of the
    reference and one implementation; the FlashInfer wrapper measured on the H200 only."""
    b = basic
    definition = b["definition"]
    big = world.workload(definition, "f3e1c2aa-0000-4000-8000-000000000001", 4096)
    small = world.workload(definition, "0b7d9e55-0000-4000-8000-000000000002", 16)
    cpu = world.environment("Intel Xeon Platinum 8480+")
    long_name = world.implementation(definition, "triton_gemm_with_a_name_longer_than_thirty_characters")
    for workload, fast, reference in ((big, 400_000, 1_600_000), (small, 2_000, 4_000)):
        world.run(workload, long_name, b["protocol"], cpu, fast)
        world.run(workload, b["reference"], b["protocol"], cpu, reference)
    world.run(big, b["flashinfer"], b["protocol"], b["h200"], 9_000)
    world.commit("runs")
    return {**b, "big": big, "small": small, "long": long_name}


def test_the_reference_stands_in_for_a_baseline_with_no_run_on_the_board(
    world: World, uuid_world: dict[str, StoredRecord]
) -> None:
    with QueryIndex.open(world.registry) as index:
        summary = definition_leaderboard(index, "gemm_n64_k64", policy=POLICY)
    assert summary.baseline is not None
    assert summary.baseline.name == "flashinfer_wrapper_abc123"
    boards = {board.gpu: board for board in summary.boards}
    h200 = boards["H200"]
    assert h200.baseline == summary.baseline  # the wrapper has runs there
    (cpu,) = (board for gpu, board in boards.items() if gpu != "H200")
    assert cpu.baseline is not None
    assert (cpu.baseline.name, cpu.baseline.source, cpu.baseline.instead_of) == (
        "reference",
        "reference",
        "flashinfer_wrapper_abc123",
    )
    standings = {s.name: s for s in cpu.implementations}
    long_name = "triton_gemm_with_a_name_longer_than_thirty_characters"
    # 1.6 ms / 400 µs = 4 and 4 µs / 2 µs = 2: the geometric mean is sqrt(8)
    assert standings[long_name].geomean_speedup == pytest.approx(8**0.5)
    assert standings[long_name].speedup_workloads == 2
    assert standings["reference"].geomean_speedup == pytest.approx(1.0)
    # workloads sorted by the axis that tells them apart (M = 16 before M = 4096), not by their uuids
    assert [record.group.workload_name for record in cpu.records] == [
        "0b7d9e55-0000-4000-8000-000000000002",
        "f3e1c2aa-0000-4000-8000-000000000001",
    ]


def test_the_summary_shows_axes_a_legend_the_fallback_and_whole_names(
    cli: RunCli, world: World, uuid_world: dict[str, StoredRecord]
) -> None:
    result = cli("leaderboard", "gemm_n64_k64", "--registry", world.registry.root)
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert text.count(SUMMARY_LEGEND) == 2  # one under each board
    assert "speed-ups over the reference (reference) here: flashinfer_wrapper_abc123 has no run on this board" in (
        " ".join(text.split())
    )
    assert "geomean vs reference (workloads)" in text
    assert "2.83× (2)" in text
    assert "M=16" in text
    cpu_board = text[text.index("records on 2 of 4 workloads") :]
    assert cpu_board.index("M=16") < cpu_board.index("M=4096")
    assert "triton_gemm_with_a_name_longer_than_thirty_characters" in text  # stdout is no terminal: whole
    assert "f3e1c2aa-0000-4000-8000-000000000001" in text
    doc = json.loads(cli("leaderboard", "gemm_n64_k64", "--registry", world.registry.root, "--json").stdout)
    cpu = next(board for board in doc["boards"] if board["gpu"] != "H200")
    assert cpu["baseline"] == {
        "implementation": "reference",
        "source": "reference",
        "insteadOf": "flashinfer_wrapper_abc123",
    }
    workload = cli("leaderboard", "gemm_n64_k64", "--workload", "f3e1c2aa", "--registry", world.registry.root)
    assert workload.exit_code == 0, workload.output
    assert GROUP_LEGEND in workload.stdout
    assert "triton_gemm_with_a_name_longer_than_thirty_characters" in workload.stdout


def test_a_citation_of_a_run_names_gpu_figure_statistic_submitter_and_evidence(
    cli: RunCli, world: World, uuid_world: dict[str, StoredRecord]
) -> None:
    run = world.run(uuid_world["small"], uuid_world["fast"], uuid_world["protocol"], uuid_world["h200"], 12_345)
    world.commit("one more run")
    text = " ".join(cli("cite", run.digest, "--registry", world.registry.root).stdout.split())
    assert "H200, median 12.3 µs, no valid submission signature (unsigned)." in text
    doc = json.loads(cli("cite", run.digest, "--json", "--registry", world.registry.root).stdout)
    assert (doc["gpu"], doc["latencyNs"], doc["primaryStatistic"]) == ("H200", 12_345, "median")
    assert (doc["submitters"], doc["evidence"]) == ([], "unsigned")
    bibtex = cli("cite", run.digest, "--format", "bibtex", "--registry", world.registry.root).stdout
    assert "H200, median 12345 ns, no valid submission signature (unsigned)" in bibtex
    definition = json.loads(cli("cite", "gemm_n64_k64", "--json", "--registry", world.registry.root).stdout)
    assert definition["gpu"] is None
    assert definition["submitters"] == []


def test_history_lists_the_names_of_one_commit_in_natural_order(world: World, basic: dict[str, StoredRecord]) -> None:
    from kictl.rank import history

    definition = basic["definition"]
    for name, m in (("b128x", 1128), ("b16x", 1016), ("b1", 1001), ("b8x", 1008)):
        world.workload(definition, name, m)
    world.commit("workloads")
    with QueryIndex.open(world.registry) as index:
        result = history(index, "gemm_n64_k64", policy=POLICY)
    names = [entry.name for entry in result.entries if entry.kind == "Workload"]
    assert names.index("b1") < names.index("b8x") < names.index("b16x") < names.index("b128x")

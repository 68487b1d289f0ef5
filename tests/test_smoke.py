"""The bundled registry: it validates, its H200 results verify, and the leaderboards rank them."""

from __future__ import annotations

import json

import pytest

from kictl import trust
from kictl.store import Registry
from tests.conftest import RunCli


def test_bundled_registry_validates(cli: RunCli, bundled_results: Registry) -> None:
    result = cli("validate", "--registry", bundled_results.root, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["ok"] is True
    assert report["counts"]["Definition"] == 5
    assert report["counts"]["BenchmarkRun"] == report["counts"]["attestations"] > 0


def test_definitions_list(cli: RunCli, bundled_registry: Registry) -> None:
    result = cli("definitions", "list", "--registry", bundled_registry.root, "--json")
    assert result.exit_code == 0, result.output
    names = {row["name"] for row in json.loads(result.stdout)}
    assert "gqa_paged_prefill_causal_h24_kv4_d128_ps1" in names


@pytest.mark.slow
def test_bundled_results_verify_and_rank(cli: RunCli, bundled_results: Registry) -> None:
    assert cli("trust", "verify", "--registry", bundled_results.root).exit_code == 0
    runs = [record.digest for record in bundled_results.iter_records(["BenchmarkRun"])]
    for digest in runs:
        report = trust.check_record(bundled_results, digest)
        assert report.ok, digest
    board = cli(
        "leaderboard", "gqa_paged_prefill_causal_h24_kv4_d128_ps1", "--workload", "q154_kv154",
        "--gpu", "H200", "--registry", bundled_results.root, "--json",
    )  # fmt: skip
    assert board.exit_code == 0, board.output
    (group,) = json.loads(board.stdout)
    leader = group["rows"][0]
    assert (leader["rank"], leader["implementation"].rsplit("_", 1)[0]) == (1, "flashinfer_wrapper")
    assert leader["run"] in runs
    assert not leader["belowFloor"]
    assert [row["implementation"].rsplit("_", 1)[0] for row in group["rows"]] == [
        "flashinfer_wrapper",
        "torch_sdpa",
        "reference",
    ]

"""The bundled registry: it validates, its H200 results verify, and the leaderboards rank them."""

from __future__ import annotations

import base64
import json

import pytest

from kictl import trust
from kictl.store.registry import Registry
from tests.conftest import RunCli


def test_bundled_registry_validates(cli: RunCli, bundled_results: Registry) -> None:
    result = cli("validate", "--registry", bundled_results.root, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["ok"] is True
    assert report["counts"]["Definition"] == 5
    assert report["counts"]["BenchmarkRun"] > 0
    # every run is either submitted (a submission attestation about it) or a verifier rerun's own run
    # (named by the rerun attestation about the run it reran), and each attestation is one of the two
    submitted, rerun_runs, envelopes = set(), set(), 0
    for path in (bundled_results.root / "registry" / "attestations").rglob("*.dsse.json"):
        envelopes += 1
        statement = json.loads(base64.b64decode(json.loads(path.read_bytes())["payload"]))
        subject = "sha256:" + statement["subject"][0]["digest"]["sha256"]
        if statement["predicateType"].endswith("/rerun/v1"):
            rerun_runs.add(statement["predicate"]["runDigest"])
        else:
            submitted.add(subject)
    runs = {record.digest for record in bundled_results.iter_records(["BenchmarkRun"])}
    assert runs == submitted | rerun_runs
    assert not submitted & rerun_runs
    assert envelopes == report["counts"]["attestations"]


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
    # issue 42: no measured run is below its physical floor, FlashInfer's baselines included. Each board's record
    # (its #1) is at or above the floor, so every slower run of the board is too.
    definitions = sorted({record.name for record in bundled_results.iter_records(["Definition"])})
    boards = 0
    for name in definitions:
        shown = cli("leaderboard", name, "--registry", bundled_results.root, "--json")
        assert shown.exit_code == 0, shown.output
        for gpu_board in json.loads(shown.stdout)["boards"]:
            for record in gpu_board["records"]:
                boards += 1
                assert not record["belowFloor"], (name, gpu_board["gpu"], record["workloadName"])
                assert record["floorNs"] is None or record["latencyNs"] >= record["floorNs"], record
    assert boards >= 60  # H200 and H100 boards of the five bundled definitions (79 + 112 runs)

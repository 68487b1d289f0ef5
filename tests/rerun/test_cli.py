"""``kictl rerun`` and ``kictl attest rerun`` end to end: real bench runs, real keys, real git, real torch.

Each test reads the shared rerun sessions of conftest.py and, when it signs,
signs into its own copy of the registry; ``kictl verify`` and ``kictl
leaderboard`` then show the evidence levels ``kictl.trust`` computes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kictl.standing import verifier_reruns
from kictl.store.registry import Registry
from tests.conftest import RunCli, copy_bundled
from tests.rerun.conftest import WIDE, Origin, Reruns, clone, commit, make_request

pytestmark = pytest.mark.slow  # the shared fixtures run kictl bench and kictl rerun (tens of seconds, once)


def _verify(cli: RunCli, root: Path, digest: str) -> dict[str, Any]:
    result = cli("verify", digest, "--registry", root, "--json")
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def _attest(cli: RunCli, registry: Registry, folder: Path, key: Path, *extra: str) -> Any:
    return cli("attest", "rerun", folder, "--key", key, "--registry", registry.root, "--json", *extra)


def _rows(cli: RunCli, root: Path, definition: str, workload: str, evidence: str) -> dict[str, dict[str, Any]]:
    result = cli(
        "leaderboard", definition, "--workload", workload, "--evidence", evidence, "--registry", root, "--json"
    )
    assert result.exit_code == 0, result.output
    return {row["run"]: row for group in json.loads(result.stdout) for row in group["rows"]}


def _attestation_files(registry: Registry) -> set[Path]:
    return set(registry.attestations_dir.rglob("*.dsse.json"))


def test_reruns_of_the_pytorch_and_reference_kernels_agree_and_make_them_verified(
    cli: RunCli, origin: Origin, wide: Reruns, tmp_path: Path
) -> None:
    assert wide.result.exit_code == 0, wide.result.output
    # issue 45: a line per step on a log, each group saying what is left
    steps = [line for line in wide.result.stderr.splitlines() if "groups done; now " in line]
    assert [line.split("s ", 1)[1].split(";")[0] for line in steps] == ["0/2 groups done", "1/2 groups done"], steps
    assert steps[0].endswith("(0 of 2, time left unknown yet)")
    assert steps[1].endswith(" left)")
    verdicts = wide.verdicts
    names = ("rmsnorm_torch", "rmsnorm_reference", "gemm_torch", "gemm_reference")
    assert {verdicts[origin.runs[name]]["verdict"] for name in names} == {"agrees"}
    for row in verdicts.values():
        assert row["status"] == "passed"
        assert row["rerun"] != row["original"]
        assert row["tolerance"] == WIDE
        assert len(row["seedSalt"]) == 32
        assert abs(row["ratio"] - row["rerunNs"] / row["originalNs"]) < 1e-5 * row["ratio"]
    registry = clone(wide.root, tmp_path / "registry")
    signed = _attest(cli, registry, wide.folder, origin.key("verifier"), "--require-verifier")
    assert signed.exit_code == 0, signed.output
    assert [row["verdict"] for row in json.loads(signed.stdout)] == ["agrees"] * 4
    commit(registry.root, "Verifier reruns")
    for name in names:
        report = _verify(cli, registry.root, origin.runs[name])
        assert report["level"] == "verified", report
        reruns = [att for att in report["attestations"] if att["type"] == "rerun"]
        assert [att["countsFor"] for att in reruns] == ["evidence"]
        assert reruns[0]["predicate"]["runDigest"] == verdicts[origin.runs[name]]["rerun"]
    # the reruns' own runs are known as such, from the verifier's attestations alone
    assert verifier_reruns(registry) == {verdicts[origin.runs[name]]["rerun"]: (origin.runs[name],) for name in names}
    rows = _rows(cli, registry.root, "rmsnorm_h4096", "b1", "verified")
    assert {rows[origin.runs[name]]["evidence"] for name in ("rmsnorm_torch", "rmsnorm_reference")} == {"verified"}
    rows = _rows(cli, registry.root, "gemm_n4096_k4096", "m1", "verified")
    assert {rows[origin.runs[name]]["evidence"] for name in ("gemm_torch", "gemm_reference")} == {"verified"}


def test_a_made_up_claim_disagrees_and_becomes_disputed(
    cli: RunCli, origin: Origin, tight: Reruns, tmp_path: Path
) -> None:
    assert tight.result.exit_code == 1, tight.result.output  # not every rerun agrees
    verdicts = tight.verdicts
    honest, edited = verdicts[origin.runs["paced"]], verdicts[origin.runs["edited"]]
    assert honest["verdict"] == "agrees", honest
    assert edited["verdict"] == "disagrees", edited
    assert 1.3 < edited["ratio"] < 2.1  # ~1/0.6 of the made-up median, give or take a busy CPU
    assert "slower than claimed" in edited["reason"]
    registry = clone(origin.root, tmp_path / "registry")
    signed = _attest(cli, registry, tight.folder, origin.key("verifier"), "--require-verifier")
    assert signed.exit_code == 0, signed.output
    commit(registry.root, "Verifier reruns")
    assert _verify(cli, registry.root, origin.runs["edited"])["level"] == "disputed"
    assert _verify(cli, registry.root, origin.runs["paced"])["level"] == "verified"
    # the default leaderboard shows a disputed claim, labelled, after every undisputed run (the seed-tuned
    # implementation's only passed run; the paced implementation's row is its verified run, not the edited
    # copy); --evidence reported leaves it out
    default = cli("leaderboard", "rmsnorm_h4096", "--workload", "b1", "--registry", registry.root, "--json")
    assert default.exit_code == 0, default.output
    (rows,) = [
        group["rows"]
        for group in json.loads(default.stdout)
        if origin.runs["paced"] in {row["run"] for row in group["rows"]}
    ]
    assert rows[-1]["run"] == origin.runs["tuned"], rows
    assert rows[-1]["evidence"] == "disputed"
    assert all(row["evidence"] != "disputed" for row in rows[:-1])
    assert next(row for row in rows if row["run"] == origin.runs["paced"])["evidence"] == "verified"
    assert origin.runs["edited"] not in {row["run"] for row in rows}
    assert origin.runs["tuned"] not in _rows(cli, registry.root, "rmsnorm_h4096", "b1", "reported")
    verified = _rows(cli, registry.root, "rmsnorm_h4096", "b1", "verified")
    assert verified[origin.runs["paced"]]["evidence"] == "verified"
    everything = _rows(cli, registry.root, "rmsnorm_h4096", "b1", "disputed")
    assert everything[origin.runs["tuned"]]["evidence"] == "disputed"


def test_a_submission_tuned_to_the_published_seeds_fails_on_fresh_ones(
    cli: RunCli, origin: Origin, tight: Reruns, tmp_path: Path
) -> None:
    registry = Registry(origin.root)
    original = registry.load(origin.runs["tuned"])
    assert original.raw["spec"]["status"] == "passed"  # by kictl bench with public seeds, or as claimed
    tuned = tight.verdicts[origin.runs["tuned"]]
    assert tuned["verdict"] == "failed", tuned
    # zeros on fresh inputs: wrong values, and the same outputs for different inputs (outputsFresh)
    assert tuned["status"] in ("incorrect_numerical", "reward_hack")
    assert tuned["reason"].startswith(tuned["status"])
    copy = clone(origin.root, tmp_path / "registry")
    assert _attest(cli, copy, tight.folder, origin.key("verifier")).exit_code == 0
    commit(copy.root, "Verifier reruns")
    report = _verify(cli, copy.root, origin.runs["tuned"])
    assert report["level"] == "disputed"
    predicate = next(att["predicate"] for att in report["attestations"] if att["type"] == "rerun")
    assert predicate["verdict"] == "failed"
    assert tuned["seedSalt"] in predicate["note"]


def test_a_key_without_the_verifier_role_changes_nothing(
    cli: RunCli, origin: Origin, tight: Reruns, tmp_path: Path
) -> None:
    registry = clone(origin.root, tmp_path / "registry")
    before = _attestation_files(registry)
    refused = _attest(cli, registry, tight.folder, origin.key("community"), "--require-verifier")
    assert refused.exit_code == 1, refused.output
    assert "no verifier role" in refused.stderr
    assert _attestation_files(registry) == before
    assert not registry.has_record(tight.verdicts[origin.runs["paced"]]["rerun"])
    # results made for the verifier's request cannot be signed by another key, verifier or not
    refused = _attest(cli, registry, tight.folder, origin.key("community"))
    assert refused.exit_code == 1, refused.output
    assert "the rerun request was made by key" in refused.stderr
    assert _attestation_files(registry) == before
    assert verifier_reruns(registry) == {}


def test_a_rerun_on_another_gpu_product_is_refused(
    cli: RunCli, origin: Origin, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    out = tmp_path / "out"
    refused = cli("rerun", origin.runs["elsewhere"], "--registry", origin.root, "--out", out)
    assert refused.exit_code == 5, refused.output
    assert "cannot be rerun comparably" in refused.stderr
    assert "it ran on Imaginary CPU 9000" in refused.stderr
    assert not out.exists()
    request = make_request(origin.root, [origin.runs["elsewhere"]], origin.key("verifier"), tmp_path / "request.json")
    forced = cli("rerun", "--request", request, "--force", "--registry", origin.root, "--out", out, "--json")
    assert forced.exit_code == 1, forced.output
    (row,) = json.loads(forced.stdout)
    assert row["verdict"] == "inconclusive"
    assert row["forced"] is True
    registry = clone(origin.root, tmp_path / "registry")
    before = _attestation_files(registry)
    signed = _attest(cli, registry, out, origin.key("verifier"))
    assert signed.exit_code == 0, signed.output
    assert "not signed" in signed.stderr
    assert _attestation_files(registry) == before
    # the bundled H200 runs, on this machine's CPU: another product and another comparability family
    bundled = copy_bundled(tmp_path_factory.mktemp("bundled") / "registry", results=True)
    h200 = next(
        record.digest
        for record in bundled.iter_records(["BenchmarkRun"])
        if record.raw["spec"]["status"] == "passed"
        and bundled.load(record.raw["spec"]["environmentDigest"]).raw["spec"]["hardware"]["product"] == "H200"
    )
    refused = cli("rerun", h200, "--device", "cpu", "--registry", bundled.root, "--out", out)
    assert refused.exit_code == 5, refused.output
    assert "it ran on H200" in refused.stderr
    assert "comparability family is kictl-cuda-device-time" in refused.stderr


def test_a_cpu_rerun_at_the_default_tolerance_warns(origin: Origin) -> None:
    from kictl.rerun.job import build_job
    from kictl.rerun.session import cpu_tolerance_warnings

    job = build_job(Registry(origin.root), origin.runs["paced"])
    assert job.settings.device == "cpu"
    (warning,) = cpu_tolerance_warnings([job], 0.1)
    assert "CPU rerun at rerunTolerance ±10%" in warning
    assert cpu_tolerance_warnings([job], 0.25) == []  # a CPU registry that signed a wider tolerance

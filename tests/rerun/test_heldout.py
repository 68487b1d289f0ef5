"""Held-out shapes in controlled reruns, on the CPU with real sandboxed bench workers (issue 32).

The bundled definitions state no legal axis values (adding them is a new
Definition version), so these tests make variants of them that do, with the
constraints ``LEGAL`` proposes, and run the bundled implementations on them
through the rerun's own bench seam.  An implementation that hard-codes the
benchmarked batch size is caught; the honest ones generalize.  The session
fixtures of tests/rerun (bundled definitions, no legal values) show that a
rerun says so, skips, and that the attestation records it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kictl import trust
from kictl.bench.judge.implementation import load_implementation
from kictl.index.query import QueryIndex
from kictl.records import DefinitionSpec, StoredRecord, WorkloadSpec, new_record, record_from_value
from kictl.rerun.heldout import check_held_out, submitted_shapes
from kictl.rerun.job import ProtocolSettings
from kictl.standing.heldout import FAILS, GENERALIZES, SKIPPED
from kictl.store.registry import Registry
from tests.conftest import REPO_ROOT, copy_bundled
from tests.rerun.conftest import ASSETS, OPTIONS, WIDE, Origin, Reruns, clone, commit, invoke, set_tolerance

IMPLEMENTATIONS = REPO_ROOT / "implementations"
#: Legal axis values for the bundled definitions, as constraints (what a new version of each could state).
LEGAL = {
    "rmsnorm_h4096": ["1 <= batch_size <= 16384"],
    "gemm_n4096_k4096": ["1 <= M <= 16384"],
    "gqa_paged_decode_h32_kv8_d128_ps1": [
        "1 <= batch_size <= 512", "1 <= num_pages <= 1048576", "1 <= num_kv_indices <= 1048576",
        "num_kv_indices <= num_pages",
    ],
    "gqa_paged_prefill_causal_h24_kv4_d128_ps1": [
        "2 <= len_indptr <= 513", "1 <= total_q <= 32768", "1 <= num_pages <= 1048576",
        "1 <= num_kv_indices <= 1048576", "num_kv_indices <= num_pages",
    ],
    "gqa_paged_prefill_causal_h20_kv4_d128_ps64": [
        "2 <= len_indptr <= 513", "1 <= total_q <= 32768", "1 <= num_pages <= 65536",
        "1 <= num_kv_indices <= 65536", "num_kv_indices <= num_pages",
    ],
}  # fmt: skip
CPU = ProtocolSettings(
    device="cpu", timer="perf_counter_ns", statistic="median", family="kictl-cpu", harness="kictl",
    warmup=None, iterations=None, trials=None, rounds=2, cuda_graph=False, time_setup=False,
    atol=None, rtol=None, matched_ratio=None,
)  # fmt: skip


def _legal_variant(registry: Registry, name: str) -> tuple[StoredRecord, StoredRecord, list[dict[str, int]]]:
    """The bundled definition with ``LEGAL[name]`` added to its constraints; a workload of it; its workloads' shapes."""
    original = registry.resolve(name, ["Definition"])
    spec = json.loads(json.dumps(original.raw["spec"]))
    spec["constraints"] = [*spec.get("constraints", []), *LEGAL[name]]
    variant = new_record(DefinitionSpec.model_validate_json(json.dumps(spec)), name=name)
    submitted = submitted_shapes(registry, original)
    template = next(
        record
        for record in registry.iter_records(["Workload"])
        if isinstance(record.model.spec, WorkloadSpec) and record.model.spec.definition_digest == original.digest
    )
    return variant, template, submitted


def _implementations(definition: StoredRecord, *paths: Path) -> list[StoredRecord]:
    return [load_implementation(str(path), definition, None).record for path in paths]


@pytest.fixture(scope="module")
def bundled(tmp_path_factory: pytest.TempPathFactory) -> Registry:
    return copy_bundled(tmp_path_factory.mktemp("heldout") / "bundled")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "implementations"),
    [
        ("gemm_n4096_k4096", ("torch_matmul", "reference")),
        ("gqa_paged_decode_h32_kv8_d128_ps1", ("torch_batched", "reference")),
        ("gqa_paged_prefill_causal_h24_kv4_d128_ps1", ("torch_sdpa", "reference")),
        ("gqa_paged_prefill_causal_h20_kv4_d128_ps64", ("torch_sdpa", "reference")),
    ],
)
def test_every_honest_bundled_implementation_generalizes(
    bundled: Registry, name: str, implementations: tuple[str, ...]
) -> None:
    """The bundled implementations that run on a CPU (FlashInfer's need a GPU: the H200 part of issue 32)."""
    definition, template, submitted = _legal_variant(bundled, name)
    impls = _implementations(definition, *(IMPLEMENTATIONS / name / impl for impl in implementations))
    checks = check_held_out(definition, impls, template, submitted, CPU, device="cpu", timeout_s=600, cap=8, count=1)
    for impl in impls:
        assert checks[impl.digest].verdict == GENERALIZES, (impl.name, checks[impl.digest])


def test_a_rerun_of_a_definition_without_legal_values_says_so_and_the_attestation_records_it(
    origin: Origin, tight: Reruns, tmp_path: Path
) -> None:
    document = json.loads((tight.folder / "reruns.json").read_text())
    for result in document["results"]:
        if result.get("rerun") is None:
            continue
        assert result["heldOut"]["verdict"] == SKIPPED
        assert "states no legal values for axis batch_size" in result["heldOut"]["note"]
    registry = clone(origin.root, tmp_path / "registry")
    signed = invoke("attest", "rerun", tight.folder, "--registry", registry.root, "--key", origin.keys / "verifier.key")
    assert signed.exit_code in (0, 1), signed.output
    found = 0
    for path in (registry.root / "registry" / "attestations").rglob("*.dsse.json"):
        statement = json.loads(trust.parse_envelope(path.read_bytes()).payload)
        if statement["predicateType"].endswith("/rerun/v1"):
            assert statement["predicate"]["heldOut"]["verdict"] == SKIPPED
            found += 1
    assert found


def test_kictl_rerun_catches_the_tuned_kernel_and_the_verdict_travels_to_leaderboard_and_export(
    origin: Origin, tmp_path: Path
) -> None:
    """The whole path on the CPU: bench (it passes on its benchmarked batch), rerun (agrees on time, fails on
    held-out shapes), attest (the verdict is signed), leaderboard (shown) and export (--require-generalizes)."""
    registry = clone(origin.root, tmp_path / "registry")
    set_tolerance(registry.root, WIDE)  # a shared CI CPU does not repeat latencies closely; held-out is the point
    # readers count a policy only when the trust root signs it (docs/trust.md "What readers count")
    trust.sign_policy(registry, keys=[trust.load_private_key(origin.key("maintainer"))])
    original = registry.resolve("rmsnorm_h4096", ["Definition"])
    spec = json.loads(json.dumps(original.raw["spec"]))
    spec.update(name="rmsnorm_h4096_legal", constraints=LEGAL["rmsnorm_h4096"])
    legal = new_record(DefinitionSpec.model_validate_json(json.dumps(spec)), name="rmsnorm_h4096_legal")
    workloads = []
    for record in registry.iter_records(["Workload"]):
        if record.raw["spec"]["definitionDigest"] == original.digest:
            raw = json.loads(json.dumps(record.raw))
            raw["spec"]["definitionDigest"] = legal.digest
            workloads.append(record_from_value(raw))
    registry.add([legal, *workloads])
    commit(registry.root, "rmsnorm_h4096 with legal axis values")
    benched = invoke(
        "bench", "rmsnorm_h4096_legal", "--workload", "b7", *OPTIONS, "--impl", ASSETS / "batch7_rmsnorm.py",
        "--impl", IMPLEMENTATIONS / "rmsnorm_h4096" / "torch_rmsnorm",
        "--registry", registry.root, "--json", "--sign", origin.key("submitter"),
    )  # fmt: skip
    assert benched.exit_code == 0, benched.output
    rows = {item["implementation"].rsplit("_", 1)[0]: item for item in json.loads(benched.stdout)}
    row, honest = rows["batch7_rmsnorm"], rows["torch_rmsnorm"]
    assert row["status"] == "passed"  # right on the shape it was tuned to
    commit(registry.root, "the runs")
    for attempt in ("first", "again"):
        folder = tmp_path / attempt / "reruns"
        request = tmp_path / attempt / "request.json"  # the signing side asks first (docs/rerun.md "Binding ...")
        request.parent.mkdir()
        asked = invoke(
            "attest", "request", row["run"], honest["run"], "--key", origin.key("verifier"), "--out", request,
            "--registry", registry.root,
        )  # fmt: skip
        assert asked.exit_code == 0, asked.output
        rerun = invoke("rerun", "--request", request, "--registry", registry.root, "--out", folder, "--json")
        assert rerun.exit_code in (0, 1), rerun.output
        results = {item["original"]: item for item in json.loads((folder / "reruns.json").read_text())["results"]}
        # Both reruns are timed on a shared 2-core CI machine, where the other test process can starve one for a
        # while (a CI run at 658d627 found the honest kernel >5x slower: disputed). A verifier would rerun; so do we.
        if all(item["verdict"] == "agrees" for item in results.values()):
            break
    result = results[row["run"]]
    assert result["verdict"] == "agrees", result
    held = result["heldOut"]
    assert held["verdict"] == FAILS
    assert len(held["shapes"]) == 3
    assert all(shape["batch_size"] not in (1, 7, 64) for shape in held["shapes"])  # none a submitted batch
    assert [item["axes"] for item in held["failed"]] == held["shapes"]
    assert results[honest["run"]]["heldOut"]["verdict"] == GENERALIZES  # the same shapes, the same secret
    assert results[honest["run"]]["heldOut"]["secret"] == held["secret"]
    # the shapes were drawn from the request's secret, not one the job chose (attest rerun checks it)
    assert held["secret"] == json.loads(request.read_text())["heldOutSecret"]
    signed = invoke("attest", "rerun", folder, "--registry", registry.root, "--key", origin.key("verifier"))
    assert signed.exit_code == 0, signed.output
    commit(registry.root, "the verifier's rerun")
    board = invoke("leaderboard", "rmsnorm_h4096_legal", "--workload", "b7", "--registry", registry.root)
    (tuned_line,) = [line for line in board.stdout.splitlines() if "batch7_rmsnorm" in line]
    (honest_line,) = [line for line in board.stdout.splitlines() if "torch_rmsnorm" in line]
    assert tuned_line.endswith("fails on held-out shapes"), board.stdout
    assert honest_line.endswith("generalizes"), board.stdout
    with QueryIndex.open(registry) as index:
        (facts,) = index.runs([row["run"]])
    product = {"product": str(facts.gpu)}  # the index's name of the CPU it ran on
    exported = invoke(
        "export", "flashinfer-trace", tmp_path / "all", "--gpu", product["product"], "--definition",
        "rmsnorm_h4096_legal", "--registry", registry.root, "--json",
    )  # fmt: skip
    assert exported.exit_code == 0, exported.output
    winner = json.loads(exported.stdout)["exported"][0]["run"]
    general = invoke(
        "export", "flashinfer-trace", tmp_path / "general", "--gpu", product["product"], "--definition",
        "rmsnorm_h4096_legal", "--require-generalizes", "--registry", registry.root, "--json",
    )  # fmt: skip
    # whichever was faster here, --require-generalizes exports the honest kernel and never the tuned one
    assert general.exit_code == 0, general.output
    document = json.loads(general.stdout)
    assert [item["run"] for item in document["exported"]] == [honest["run"]]
    reason = {item["run"]: item["reason"] for item in document["leftOut"]}[row["run"]]
    assert ("held-out shapes" in reason) if winner == row["run"] else reason.startswith(("ranked 2", "tied")), reason

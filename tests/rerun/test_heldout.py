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
from kictl.bench.implementation import load_implementation
from kictl.records import DefinitionSpec, StoredRecord, WorkloadSpec, new_record
from kictl.rerun.heldout import FAILS, GENERALIZES, SKIPPED, check_held_out, submitted_shapes
from kictl.rerun.job import ProtocolSettings
from kictl.store import Registry
from tests.conftest import REPO_ROOT, copy_bundled
from tests.rerun.conftest import ASSETS, Origin, Reruns, clone, invoke

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


def test_a_kernel_tuned_to_the_benchmarked_batch_fails_and_honest_ones_generalize(bundled: Registry) -> None:
    definition, template, submitted = _legal_variant(bundled, "rmsnorm_h4096")
    assert {shape["batch_size"] for shape in submitted} >= {7}
    folder = IMPLEMENTATIONS / "rmsnorm_h4096"
    impls = _implementations(definition, folder / "torch_rmsnorm", folder / "reference", ASSETS / "batch7_rmsnorm.py")
    checks = check_held_out(definition, impls, template, submitted, CPU, device="cpu", timeout_s=300, cap=16)
    honest, reference, tuned = (checks[impl.digest] for impl in impls)
    assert honest.verdict == GENERALIZES, honest
    assert reference.verdict == GENERALIZES, reference
    assert tuned.verdict == FAILS, tuned
    assert len(tuned.shapes) == 3
    assert all(shape["batch_size"] not in {s["batch_size"] for s in submitted} for shape in tuned.shapes)
    assert [item["axes"] for item in tuned.failed] == list(tuned.shapes)
    assert tuned.secret is not None
    assert tuned.secret == honest.secret


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

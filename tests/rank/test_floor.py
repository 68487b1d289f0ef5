"""Floor formulas on hand-computed cases, and `kictl floor` on the bundled definitions (DESIGN §6)."""

from __future__ import annotations

import json

import pytest

from kictl import blobs, canon, families
from kictl.definitions import compile_all
from kictl.families.attention import causal_pairs
from kictl.families.gpus import find_gpu
from kictl.index.facts import WorkloadFacts
from kictl.index.query import QueryIndex
from kictl.rank.floors import estimate_floor
from kictl.records import BlobInput, DefinitionSpec, RandomInput, ScalarInput, WorkloadSpec
from kictl.store.registry import Registry
from tests.conftest import REPO_ROOT, RunCli

H24 = "gqa_paged_prefill_causal_h24_kv4_d128_ps1"
FLOOR_FIELDS = {
    "workload",
    "axes",
    "gpu",
    "bytes",
    "flops",
    "bandwidthBoundNs",
    "computeBoundNs",
    "floorNs",
    "bound",
    "sources",
}


def _bundled(name: str) -> tuple[DefinitionSpec, dict[str, WorkloadSpec]]:
    (compiled,) = compile_all(REPO_ROOT, name)
    spec = compiled.definition.model.spec
    assert isinstance(spec, DefinitionSpec)
    workloads = {}
    for record in compiled.workloads:
        assert isinstance(record.model.spec, WorkloadSpec)
        workloads[record.name] = record.model.spec
    return spec, workloads


@pytest.mark.parametrize("q_len", range(0, 9))
@pytest.mark.parametrize("kv_len", range(0, 9))
def test_causal_pairs_counts_what_the_reference_mask_keeps(q_len: int, kv_len: int) -> None:
    # the reference hides key j from query i when j > i + (kv - q)
    kept = sum(1 for i in range(q_len) for j in range(kv_len) if not j > i + (kv_len - q_len))
    assert causal_pairs(q_len, kv_len) == kept


def test_causal_pairs_known_values() -> None:
    assert causal_pairs(154, 154) == 154 * 155 // 2
    assert causal_pairs(3, 5) == 3 + 4 + 5
    assert causal_pairs(5, 3) == 0 + 0 + 1 + 2 + 3


def test_q154_kv154_by_hand() -> None:
    spec, workloads = _bundled(H24)
    work = families.work(spec, workloads["q154_kv154"])
    # q and output: 154 × 24 × 128 × 2 B; K and V: 154 referenced tokens × 4 × 128 × 2 B;
    # qo_indptr, kv_indptr: 2 × 4 B; kv_indices: 154 × 4 B; sm_scale 4 B; lse: 154 × 24 × 4 B
    assert work.bytes == 2 * 946_176 + 2 * 157_696 + 8 + 8 + 616 + 4 + 14_784 == 2_223_164
    # causal, one sequence of 154 queries and 154 keys: 11,935 visible pairs × 4 × 24 heads × 128
    assert work.flops == 4 * 11_935 * 24 * 128 == 146_657_280
    b200, h200 = find_gpu("B200"), find_gpu("NVIDIA H200")
    assert b200 is not None
    assert h200 is not None
    on_b200 = families.floor(work, b200)
    assert on_b200.bandwidth_bound_ns == pytest.approx(2_223_164 / 8.0e12 * 1e9)
    assert on_b200.compute_bound_ns == pytest.approx(146_657_280 / 2250e12 * 1e9)
    assert (on_b200.bound, on_b200.floor_ns) == ("bandwidth", on_b200.bandwidth_bound_ns)
    on_h200 = families.floor(work, h200)
    assert on_h200.floor_ns == pytest.approx(463.159, abs=1e-3)
    assert on_h200.compute_bound_ns == pytest.approx(148.214, abs=1e-3)


def test_paged_prefill_counts_each_referenced_page_once_and_partial_last_pages() -> None:
    spec, _ = _bundled("gqa_paged_prefill_causal_h20_kv4_d128_ps64")
    # two sequences: queries 2 and 3; sequence 0 owns pages 7 (full) and 3 (10 tokens),
    # sequence 1 owns page 3 again (20 tokens): page 3 is read once, 20 tokens of it
    structure = {
        "qo_indptr": [0, 2, 5],
        "kv_indptr": [0, 2, 3],
        "kv_indices": [7, 3, 3],
        "kv_last_page_len": [10, 20, 0],
    }
    blob = blobs.write_safetensors({name: blobs.int32_tensor(values) for name, values in structure.items()})
    digest = canon.bytes_digest(blob)
    inputs: dict[str, object] = {name: BlobInput(type="blob", digest=digest, key=name) for name in structure}
    inputs |= {name: RandomInput(type="random", seed=1) for name in ("q", "k_cache", "v_cache")}
    inputs["sm_scale"] = ScalarInput(type="scalar", value=0.0884)
    workload = WorkloadSpec(
        definition_digest="sha256:" + "0" * 64,
        axes={"len_indptr": 3, "total_q": 5, "num_kv_indices": 3, "num_pages": 8},
        inputs=inputs,  # type: ignore[arg-type]
    )
    work = families.work(spec, workload, {digest: blob}.__getitem__)
    kv_bytes = (64 + 20) * 4 * 128 * 2
    expected = (
        5 * 20 * 128 * 2  # q
        + 2 * kv_bytes  # K and V of referenced tokens
        + 4 * 3 * 4  # qo_indptr, kv_indptr, kv_indices, kv_last_page_len
        + 4  # sm_scale
        + 5 * 20 * 128 * 2  # output
        + 5 * 20 * 4  # lse
    )
    assert work.bytes == expected == 223_684
    # sequence 0: 2 queries over 74 keys see 73 + 74; sequence 1: 3 queries over 20 keys see 18 + 19 + 20
    assert work.notes["visiblePairs"] == 147 + 57
    assert work.flops == 4 * 204 * 20 * 128


def test_decode_gemm_and_rmsnorm_by_hand() -> None:
    spec, workloads = _bundled("gqa_paged_decode_h32_kv8_d128_ps1")
    decode = families.work(spec, workloads["b1_kv73"])
    assert decode.bytes == 8192 + 2 * 73 * 8 * 128 * 2 + 8 + 73 * 4 + 4 + 8192 + 32 * 4 == 315_824
    assert decode.flops == 4 * 73 * 32 * 128
    spec, workloads = _bundled("gemm_n4096_k4096")
    gemm = families.work(spec, workloads["m7"])
    assert gemm.flops == 2 * 7 * 4096 * 4096
    assert gemm.bytes == 2 * (7 * 4096 + 4096 * 4096 + 7 * 4096)
    spec, workloads = _bundled("rmsnorm_h4096")
    norm = families.work(spec, workloads["b7"])
    assert norm.flops is None
    assert norm.bytes == 2 * (7 * 4096 + 4096 + 7 * 4096)
    h100 = find_gpu("H100 SXM")
    assert h100 is not None
    floor = families.floor(norm, h100)
    assert (floor.bound, floor.compute_bound_ns) == ("bandwidth", None)


@pytest.mark.parametrize(
    ("gpu", "bandwidth_ns", "compute_ns"), [("B200", 277.8955, 65.1810), ("H200", 463.1592, 148.2135)]
)
def test_kictl_floor_json_for_the_bundled_q154_workload(
    cli: RunCli, bundled_registry: Registry, gpu: str, bandwidth_ns: float, compute_ns: float
) -> None:
    result = cli("floor", H24, "--workload", "q154_kv154", "--gpu", gpu, "--registry", bundled_registry.root, "--json")
    assert result.exit_code == 0, result.output
    (floor,) = json.loads(result.stdout)
    assert set(floor) == FLOOR_FIELDS
    assert floor["gpu"] == gpu
    assert (floor["bytes"], floor["flops"]) == (2_223_164, 146_657_280)
    assert floor["bandwidthBoundNs"] == pytest.approx(bandwidth_ns, abs=1e-3)
    assert floor["computeBoundNs"] == pytest.approx(compute_ns, abs=1e-3)
    assert floor["floorNs"] == floor["bandwidthBoundNs"]
    assert floor["bound"] == "bandwidth"
    assert floor["axes"]["total_q"] == 154
    assert floor["axes"]["num_qo_heads"] == 24
    assert floor["workload"].startswith("sha256:")
    assert any("memory bandwidth" in source for source in floor["sources"])


def test_kictl_floor_text_prints_bytes_and_flops(cli: RunCli, bundled_registry: Registry) -> None:
    result = cli("floor", H24, "--gpu", "NVIDIA B200", "--registry", bundled_registry.root)
    assert result.exit_code == 0, result.output
    line = next(line for line in result.stdout.splitlines() if line.startswith("q154_kv154 "))
    assert "2,223,164" in line
    assert "146,657,280" in line
    assert "278 ns" in line
    assert "bandwidth" in line
    assert max(len(line) for line in result.stdout.splitlines()) <= 100


def test_kictl_floor_of_a_norm_has_no_flops(cli: RunCli, bundled_registry: Registry) -> None:
    result = cli("floor", "rmsnorm_h4096", "--gpu", "MI300X", "--registry", bundled_registry.root, "--json")
    assert result.exit_code == 0, result.output
    floors = json.loads(result.stdout)
    assert floors
    assert all(f["flops"] is None and f["computeBoundNs"] is None and f["bound"] == "bandwidth" for f in floors)


def test_kictl_floor_unknown_gpu_is_a_usage_error(cli: RunCli, bundled_registry: Registry) -> None:
    result = cli("floor", H24, "--gpu", "H210", "--registry", bundled_registry.root)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: unknown GPU 'H210' (in the datasheet table)")
    assert "closest known: H200" in result.stderr


def test_kictl_floor_unknown_definition_and_workload(cli: RunCli, bundled_registry: Registry) -> None:
    result = cli("floor", "gqa_paged_prefil", "--gpu", "H200", "--registry", bundled_registry.root)
    assert result.exit_code == 3, result.output
    assert "closest known:" in result.stderr
    result = cli("floor", H24, "--gpu", "H200", "--workload", "q155_kv154", "--registry", bundled_registry.root)
    assert result.exit_code == 3, result.output
    assert "q154_kv154" in result.stderr


@pytest.mark.slow
def test_no_published_run_is_faster_than_its_floor() -> None:
    """Issue 42's done-when over the repository's own registry, catalogue included: every passed run (the
    FlashInfer baselines, the torch alternatives, the references) has a floor on its GPU and is at or above it.
    Review lints a run below its floor when it is submitted; this holds the published runs to a family module or
    a datasheet figure changed later."""
    registry = Registry(REPO_ROOT)
    index = QueryIndex.in_memory(registry)  # the repository's registry is read, never written
    try:
        definitions = {definition.digest: definition for definition in index.definitions()}
        workloads: dict[str, dict[str, WorkloadFacts]] = {}
        checked: dict[str, int] = {}
        below, without = [], []
        for run in index.all_runs():
            if run.status != "passed" or run.latency_ns is None:
                continue
            assert run.definition in definitions, run.name
            assert run.gpu is not None, run.name
            definition = definitions[run.definition]
            if definition.digest not in workloads:
                workloads[definition.digest] = {w.digest: w for w in index.workloads(definition.digest)}
            workload = workloads[definition.digest][run.workload]
            floor = estimate_floor(index, definition, workload, run.gpu)
            if floor is None:
                without.append((definition.name, run.gpu, run.name))
                continue
            if run.latency_ns < floor.floor_ns:
                below.append((definition.name, run.gpu, run.name, run.latency_ns, round(floor.floor_ns)))
            family = (run.implementation_name or "").split("_", 1)[0]
            checked[family] = checked.get(family, 0) + 1
    finally:
        index.close()
    assert below == []
    assert without == []
    # the 1930 passed runs of 2026-12-07: the H200's and H100's of the five bundled definitions and the H100's of
    # 90 catalogue definitions (two of them sampling's), a FlashInfer baseline on most of their workloads
    assert sum(checked.values()) >= 1926
    assert checked.get("flashinfer", 0) >= 250, checked

"""Index synthesis and work formulas of the families (floors are tested with the ranking)."""

from __future__ import annotations

import itertools

import pytest

from kictl import families
from kictl.definitions import compile_all
from kictl.errors import RecordError
from kictl.families.attention import causal_pairs, split_evenly
from kictl.records import DefinitionSpec, WorkloadSpec
from tests.conftest import REPO_ROOT


def _compiled() -> dict[str, tuple[DefinitionSpec, dict[str, WorkloadSpec]]]:
    out = {}
    for item in compile_all(REPO_ROOT, catalogue=False):  # the hand-written ones: the catalogue's are its own
        spec = item.definition.model.spec
        assert isinstance(spec, DefinitionSpec)
        workloads = {}
        for w in item.workloads:
            assert isinstance(w.model.spec, WorkloadSpec)
            workloads[w.name] = w.model.spec
        out[item.definition.name] = (spec, workloads)
    return out


COMPILED = _compiled()


def test_split_and_causal_pairs() -> None:
    assert split_evenly(10, 3) == [4, 3, 3]
    assert causal_pairs(3, 3) == 6  # 1 + 2 + 3
    assert causal_pairs(2, 5) == 4 + 5
    assert causal_pairs(5, 2) == 0 + 0 + 0 + 1 + 2
    for q in range(8):
        for kv in range(8):
            assert causal_pairs(q, kv) == sum(min(max(i + 1 + kv - q, 0), kv) for i in range(q))


@pytest.mark.parametrize(("definition", "workload"), [(d, w) for d, (_, ws) in COMPILED.items() for w in ws])
def test_synthesised_structures_are_valid_and_deterministic(definition: str, workload: str) -> None:
    spec, workloads = COMPILED[definition]
    made = families.structure(spec, workloads[workload])
    again = families.structure(spec, workloads[workload])
    assert made == again
    if spec.family != "gqa-paged-attention":
        assert made.tensors == {}
        assert made.synthesized == ()
        return
    axes, tensors = made.axes, made.tensors
    kv_indptr, kv_indices = tensors["kv_indptr"], tensors["kv_indices"]
    assert kv_indptr[0] == 0
    assert kv_indptr[-1] == len(kv_indices) == axes["num_kv_indices"]
    assert all(a <= b for a, b in itertools.pairwise(kv_indptr))
    assert len(set(kv_indices)) == len(kv_indices)
    assert all(0 <= page < axes["num_pages"] for page in kv_indices)
    if "qo_indptr" in tensors:
        assert tensors["qo_indptr"][-1] == axes["total_q"]
    family = families.family_for(spec.family)
    for q_len, kv_len, pages, last in family.sequences(spec, made):  # type: ignore[attr-defined]
        assert 1 <= last <= axes["page_size"]
        assert kv_len >= q_len  # every query sees at least one key
        assert len(pages) >= 1
    other = families.structure(spec, workloads[workload], seed_offset=1)
    if axes["num_pages"] > 8 and axes["num_kv_indices"] > 4:
        assert other.tensors["kv_indices"] != kv_indices  # fresh rounds draw a new permutation


def test_h20_ps64_work_matches_measured_figures() -> None:
    """MEASURED.md: q 1117 over 1117 pages is ~79 M visible pairs, ~811 GFLOP at 4·20·128 per pair."""
    spec, workloads = COMPILED["gqa_paged_prefill_causal_h20_kv4_d128_ps64"]
    work = families.work(spec, workloads["q1117_p1117"])
    kv_tokens = work.notes["kvTokens"]
    assert 1116 * 64 < kv_tokens <= 1117 * 64
    pairs = work.notes["visiblePairs"]
    assert pairs == causal_pairs(1117, kv_tokens)
    assert work.flops == 4 * pairs * 20 * 128
    assert 78e6 < pairs < 80e6


def test_impossible_axes_are_errors() -> None:
    spec, workloads = COMPILED["gqa_paged_decode_h32_kv8_d128_ps1"]
    bad = workloads["b1_kv73"].model_copy(update={"axes": {**workloads["b1_kv73"].axes, "num_pages": 10}})
    with pytest.raises(RecordError, match="num_kv_indices 73 exceeds num_pages 10"):
        families.structure(spec, bad)

"""The FlashInfer Trace definitions of the families kictl models, for the family tests.

They come from the bundled registry (``definitions/``, once the catalogue is imported there) or, where a
family has none there, from a FlashInfer Trace dataset folder named by ``KICTL_FLASHINFER_TRACE`` (the
``flashinfer_trace/`` folder of flashinfer-ai/flashinfer-bench at ecafa9c2); a test of a family found in
neither is skipped.  Nothing of that repository is copied here: its definitions are data read where they are.

``small_workload`` builds a workload of a definition at a small legal shape: the variable axes of
``SMALL`` (the smallest that still exercise the structure: two sequences, a few pages), every structural
input synthesised, scalars at plausible values, the rest random.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import pytest

from kictl.definitions import compile_all
from kictl.records import (
    DefinitionSpec,
    RandomInput,
    ScalarInput,
    StoredRecord,
    SynthesizedInput,
    WorkloadInput,
    WorkloadSpec,
    new_record,
)
from tests.conftest import REPO_ROOT

#: The families of FlashInfer Trace that came without a family module before issue 42.
NEW_FAMILIES = (
    "gqa-ragged-attention",
    "mla-paged-attention",
    "mla-ragged-attention",
    "dsa-paged",
    "moe",
    "gdn",
    "mamba-ssu",
    "sampling",
    "rope",
)
#: Small values of the variable axes (any definition uses the ones it has).
SMALL: dict[str, int] = {
    "batch_size": 2,
    "len_indptr": 3,
    "total_q": 5,
    "total_kv": 9,
    "num_pages": 40,
    "num_kv_indices": 6,
    "num_tokens": 3,
    "max_num_pages": 40,
    "seq_len": 3,
    "total_seq_len": 7,
    "num_seqs": 2,
    "len_cu_seqlens": 3,
    "pool_size": 4,
    "state_cache_size": 5,
    "num_qo_heads": 2,
    "num_kv_heads": 1,
    "max_seq_len": 64,
}
#: Axes that depend on the definition (sparse attention and the indexer need room for topk tokens).
SMALL_BY_DEFINITION: dict[str, dict[str, int]] = {
    "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps1": {"num_pages": 2100},
    "dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64": {"num_pages": 40},
    "dsa_topk_indexer_fp8_h64_d128_topk2048_ps64": {"num_pages": 80, "max_num_pages": 40},
}
SCALARS: dict[str, bool | int | float] = {
    "sm_scale": 0.0625,
    "scale": 0.088,
    "local_expert_offset": 0,
    "routed_scaling_factor": 2.5,
}


@functools.cache
def _bundled() -> dict[str, list[DefinitionSpec]]:
    found: dict[str, list[DefinitionSpec]] = {}
    for item in compile_all(REPO_ROOT):
        spec = item.definition.model.spec
        assert isinstance(spec, DefinitionSpec)
        found.setdefault(spec.family, []).append(spec)
    return found


@functools.cache
def _dataset() -> dict[str, list[DefinitionSpec]]:
    root = os.environ.get("KICTL_FLASHINFER_TRACE")
    if not root or not Path(root).is_dir():
        return {}
    from kictl.importers.flashinfer_bench.importer import read_dataset

    found: dict[str, list[DefinitionSpec]] = {}
    for record in read_dataset(Path(root)).records.values():
        spec = record.model.spec
        if isinstance(spec, DefinitionSpec):
            found.setdefault(spec.family, []).append(spec)
    return found


def definitions_of(family: str) -> list[DefinitionSpec]:
    """Every definition of ``family`` (bundled first), sorted by name; skips the test when there is none."""
    found = _bundled().get(family) or _dataset().get(family)
    if not found:
        pytest.skip(f"no {family} definition: neither bundled nor in $KICTL_FLASHINFER_TRACE")
    return sorted(found, key=lambda spec: spec.name)


def small_axes(spec: DefinitionSpec) -> dict[str, int]:
    values = {**SMALL, **SMALL_BY_DEFINITION.get(spec.name, {})}
    axes = {name: values[name] for name, axis in spec.axes.items() if axis.type == "var"}
    if "len_indptr" in axes and "batch_size" in axes:
        axes["len_indptr"] = axes["batch_size"] + 1
    if "len_cu_seqlens" in axes:
        axes["len_cu_seqlens"] = axes["num_seqs"] + 1
    return axes


def small_workload(spec: DefinitionSpec, structural: list[str], *, seed: int = 7) -> StoredRecord:
    """A Workload record of ``spec`` at ``small_axes``; ``structural`` inputs are synthesised."""
    inputs: dict[str, WorkloadInput] = {}
    for index, (name, tensor) in enumerate(spec.inputs.items()):
        if name in structural:
            inputs[name] = SynthesizedInput(type="synthesized", seed=seed)
        elif tensor.shape is None:
            inputs[name] = ScalarInput(type="scalar", value=SCALARS.get(name, 1.0))
        else:
            inputs[name] = RandomInput(type="random", seed=seed * 100 + index)
    workload = WorkloadSpec(definition_digest="sha256:" + "0" * 64, axes=small_axes(spec), inputs=inputs)
    return new_record(workload, name=f"{spec.name}-small")


def run_reference(spec: DefinitionSpec, args: list[Any]) -> Any:
    """The definition's reference called on ``args`` (in this process: a test's own definitions are data)."""
    namespace: dict[str, Any] = {}
    exec(compile(spec.reference, f"<reference of {spec.name}>", "exec"), namespace)
    return namespace["run"](*args)

"""Sparse attention over a paged cache (DeepSeek sparse attention, FlashInfer Trace ``dsa_paged``).

Two kinds of definition share the family:

* **sparse attention** (``sparse_indices [num_tokens, topk]``): query token t attends to the cache tokens
  ``sparse_indices[t]``, each a flat token id ``page * page_size + offset`` in ``[0, num_pages * page_size)``,
  ``-1`` marking an unused slot.  Synthesis picks ``topk`` distinct tokens per query (all of them, then
  ``-1``, when the cache holds fewer).  Bytes count the distinct referenced tokens of both caches; FLOPs are
  ``valid indices * heads * (2 * (ckv + kpe) + 2 * ckv)``, as for MLA.
* **the top-k indexer** (``block_table [batch, max_num_pages]``, ``seq_lens [batch]``): sequence b's keys are
  the first ``seq_lens[b]`` tokens of pages ``block_table[b, :ceil(seq_lens[b] / page_size)]``.  Synthesis
  gives each sequence distinct pages of its own and a length that fills at least ``topk`` tokens where its
  pages can hold them; the unused tail of a row repeats its last page (in range, never read).  Bytes count
  the referenced pages of the FP8 key cache; FLOPs are ``2 * keys * heads * index_head_dim`` (the scores).
  The packed key cache (FP8 values then float32 scales, per page) is drawn by the
  ``fp8-paged-index-cache`` generator: random bytes would hold NaN scales.
"""

from __future__ import annotations

import random

from kictl.errors import RecordError
from kictl.families import Family, Structure, paged_bytes, register
from kictl.records import DefinitionSpec


def _is_indexer(spec: DefinitionSpec) -> bool:
    return "block_table" in spec.inputs


class SparseAttention(Family):
    name = "dsa-paged"
    structural_inputs = frozenset({"sparse_indices", "block_table", "seq_lens"})

    # ------------------------------------------------------------------ synthesis

    def check_axes(self, spec: DefinitionSpec, axes: dict[str, int]) -> None:
        if _is_indexer(spec):
            batch, pages = axes["batch_size"], axes["num_pages"]
            if batch < 1:
                raise RecordError(f"{spec.name}: batch_size must be at least 1")
            if axes["max_num_pages"] < 1:
                raise RecordError(f"{spec.name}: max_num_pages must be at least 1")
            if pages < batch:
                raise RecordError(f"{spec.name}: num_pages {pages} gives some sequence no page of its own")
        elif axes["num_pages"] < 1:
            raise RecordError(f"{spec.name}: num_pages must be at least 1")

    def synthesize(self, spec: DefinitionSpec, axes: dict[str, int], seed: int) -> dict[str, list[int]]:
        self.check_axes(spec, axes)
        rng = random.Random(seed)
        if not _is_indexer(spec):
            tokens = axes["num_pages"] * axes["page_size"]
            topk = axes["topk"]
            rows: list[int] = []
            for _ in range(axes["num_tokens"]):
                chosen = rng.sample(range(tokens), min(topk, tokens))
                rows.extend(chosen + [-1] * (topk - len(chosen)))
            return {"sparse_indices": rows}
        batch, page_size, width = axes["batch_size"], axes["page_size"], axes["max_num_pages"]
        own = min(width, axes["num_pages"] // batch)  # pages each sequence may own, distinct across sequences
        pool = rng.sample(range(axes["num_pages"]), own * batch)
        least_pages = min(own, max(1, -(-axes["topk"] // page_size)))
        table: list[int] = []
        lens: list[int] = []
        for b in range(batch):
            count = rng.randint(least_pages, own)
            pages = pool[b * own : b * own + count]
            lens.append((count - 1) * page_size + rng.randint(1, page_size))
            table.extend(pages + [pages[-1]] * (width - count))
        return {"block_table": table, "seq_lens": lens}

    def generated(self, spec: DefinitionSpec) -> dict[str, str]:
        if _is_indexer(spec) and "k_index_cache_fp8" in spec.inputs:
            return {"k_index_cache_fp8": "fp8-paged-index-cache"}
        return {}

    # ------------------------------------------------------------------ work

    def referenced(self, spec: DefinitionSpec, structure: Structure) -> tuple[int, int]:
        """(distinct cache tokens read, index entries used)."""
        axes, tensors = structure.axes, structure.tensors
        if not _is_indexer(spec):
            valid = [index for index in tensors["sparse_indices"] if index >= 0]
            return len(set(valid)), len(valid)
        page_size, width = axes["page_size"], axes["max_num_pages"]
        pages: set[int] = set()
        keys = 0
        for b, length in enumerate(tensors["seq_lens"]):
            count = min(width, -(-max(0, length) // page_size))
            pages.update(tensors["block_table"][b * width : b * width + count])
            keys += min(length, count * page_size)
        return len(pages) * page_size, keys

    def bytes_moved(self, spec: DefinitionSpec, structure: Structure) -> int:
        axes = structure.axes
        tokens, _ = self.referenced(spec, structure)
        return paged_bytes(spec, axes, tokens, lambda _, shape: len(shape) >= 3 and shape[0] == "num_pages")

    def flops(self, spec: DefinitionSpec, structure: Structure) -> int | None:
        axes = structure.axes
        _, used = self.referenced(spec, structure)
        if _is_indexer(spec):
            return 2 * used * axes["num_index_heads"] * axes["index_head_dim"]
        per_pair = 2 * (axes["head_dim_ckv"] + axes["head_dim_kpe"]) + 2 * axes["head_dim_ckv"]
        return used * axes["num_qo_heads"] * per_pair

    def compute_dtype(self, spec: DefinitionSpec) -> str:
        return "float8_e4m3fn" if _is_indexer(spec) else super().compute_dtype(spec)

    def notes(self, spec: DefinitionSpec, structure: Structure) -> dict[str, int]:
        tokens, used = self.referenced(spec, structure)
        return {"kvTokens": tokens, "indicesUsed": used}

    def relations(self, spec: DefinitionSpec) -> list[str]:
        if _is_indexer(spec):
            return ["batch_size >= 1", "max_num_pages >= 1", "batch_size <= num_pages"]
        return ["num_tokens >= 1", "num_pages >= 1"]


def register_all() -> None:
    register(SparseAttention(), "dsa_paged", "dsa-sparse-attention")

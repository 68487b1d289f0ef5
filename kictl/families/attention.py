"""Paged and ragged attention: index synthesis, bytes and FLOPs.

Conventions, as the bundled and FlashInfer Trace references define them:

* prefill has ``qo_indptr`` (queries of sequence b are ``qo_indptr[b]:qo_indptr[b+1]``);
  decode has one query per sequence (``batch_size`` of them);
* sequence b owns pages ``kv_indices[kv_indptr[b]:kv_indptr[b+1]]``; its last
  page holds ``kv_last_page_len[b]`` tokens (``page_size`` when the definition
  has no such input), so it has ``(pages - 1) * page_size + last`` KV tokens;
* causal prefill aligns the last query with the last key: query i of a
  sequence with ``q`` queries and ``kv`` keys sees ``clamp(i + 1 + kv - q, 0, kv)`` keys.

FLOPs are ``4 * visible_pairs * num_qo_heads * head_dim`` (QKᵀ and PV, two
FLOPs per multiply-add).  Bytes count every input read once except the K and
V caches, of which only the tokens of referenced pages count, and every
output written once.
"""

from __future__ import annotations

import math
import random

from kictl.errors import RecordError
from kictl.families import Family, Structure, paged_bytes, register, tensor_shape
from kictl.records import DefinitionSpec

STRUCTURAL = frozenset({"qo_indptr", "kv_indptr", "kv_indices", "kv_last_page_len", "last_page_len"})
KV_CACHES = ("k_cache", "v_cache", "kv_cache", "ckv_cache", "kpe_cache")


def split_evenly(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` sizes that differ by at most one, larger first."""
    base, extra = divmod(total, parts)
    return [base + (1 if index < extra else 0) for index in range(parts)]


def _cumsum(sizes: list[int]) -> list[int]:
    out = [0]
    for size in sizes:
        out.append(out[-1] + size)
    return out


def causal_pairs(q_len: int, kv_len: int) -> int:
    """Σ over queries i < q_len of clamp(i + 1 + kv_len - q_len, 0, kv_len)."""
    if q_len <= 0 or kv_len <= 0:
        return 0
    low = 1 + kv_len - q_len  # what query 0 sees before clamping
    high = kv_len  # what the last query sees
    total = 0
    # values in [max(low, 1), min(high, kv_len - 1)] contribute themselves
    start, stop = max(low, 1), min(high, kv_len - 1)
    if start <= stop:
        total += (start + stop) * (stop - start + 1) // 2
    # values >= kv_len contribute kv_len (only the last query, since high == kv_len)
    total += kv_len * max(0, high - max(low, kv_len) + 1)
    return total


class PagedAttention(Family):
    """Grouped-query attention over a paged KV cache (prefill and decode)."""

    name = "gqa-paged-attention"
    structural_inputs = STRUCTURAL

    @staticmethod
    def is_prefill(spec: DefinitionSpec) -> bool:
        return "qo_indptr" in spec.inputs

    @staticmethod
    def is_causal(spec: DefinitionSpec) -> bool:
        tags = spec.tags or ()
        return "causal" in spec.name or "mask:causal" in tags

    @staticmethod
    def batch_size(axes: dict[str, int]) -> int:
        if "len_indptr" in axes:
            return axes["len_indptr"] - 1
        return axes["batch_size"]

    def synthesize(self, spec: DefinitionSpec, axes: dict[str, int], seed: int) -> dict[str, list[int]]:
        """Even splits of queries and pages over the sequences, pages a random permutation.

        Last-page lengths are drawn with the same seed from ``[lowest, page_size]``,
        where ``lowest`` gives each sequence at least as many keys as queries
        when its pages can hold them.
        Raises ``RecordError`` for axes no valid structure has.
        """
        self.check_axes(spec, axes)
        batch = self.batch_size(axes)
        page_size = axes.get("page_size", 1)
        num_pages = axes.get("num_pages", 0)
        num_indices = axes.get("num_kv_indices", 0)
        rng = random.Random(seed)
        pages = rng.sample(range(num_pages), num_indices)  # distinct pages in random order
        page_counts = split_evenly(num_indices, batch)
        prefill = self.is_prefill(spec)
        q_lens = split_evenly(axes["total_q"], batch) if prefill else [1] * batch
        last = []
        for q_len, count in zip(q_lens, page_counts, strict=True):
            # at least as many keys as queries where the pages allow it, so every query sees a key
            lowest = min(page_size, max(1, q_len - (count - 1) * page_size))
            last.append(rng.randint(lowest, page_size))
        made: dict[str, list[int]] = {
            "kv_indptr": _cumsum(page_counts),
            "kv_indices": pages,
            "kv_last_page_len": last,
            "last_page_len": last,
        }
        if prefill:
            made["qo_indptr"] = _cumsum(q_lens)
        out = {}
        for name in self.structural(spec):
            values = made[name]
            length = math.prod(tensor_shape(spec, name, axes))
            # a last-page tensor declared over len_indptr has one unused trailing entry
            out[name] = values + [0] * (length - len(values)) if length > len(values) else values
        return out

    def check_axes(self, spec: DefinitionSpec, axes: dict[str, int]) -> None:
        batch = self.batch_size(axes)
        num_pages = axes.get("num_pages", 0)
        num_indices = axes.get("num_kv_indices", 0)
        if batch < 1:
            raise RecordError(f"{spec.name}: a workload needs at least one sequence (len_indptr >= 2)")
        if num_indices < batch:
            raise RecordError(f"{spec.name}: num_kv_indices {num_indices} gives some sequence no page")
        if num_indices > num_pages:
            raise RecordError(f"{spec.name}: num_kv_indices {num_indices} exceeds num_pages {num_pages}")
        if "batch_size" in axes and "len_indptr" in axes and axes["len_indptr"] != axes["batch_size"] + 1:
            raise RecordError(f"{spec.name}: len_indptr must be batch_size + 1")

    def sequences(self, spec: DefinitionSpec, structure: Structure) -> list[tuple[int, int, list[int], int]]:
        """Per sequence: (queries, KV tokens, page ids, tokens in the last page)."""
        axes, tensors = structure.axes, structure.tensors
        page_size = axes.get("page_size", 1)
        kv_indptr = tensors["kv_indptr"]
        kv_indices = tensors["kv_indices"]
        last_lens = tensors.get("kv_last_page_len") or tensors.get("last_page_len")
        if "qo_indptr" in tensors:
            qo = tensors["qo_indptr"]
            q_lens = [qo[b + 1] - qo[b] for b in range(len(qo) - 1)]
        else:
            q_lens = [1] * (len(kv_indptr) - 1)
        out = []
        for b in range(len(kv_indptr) - 1):
            page_ids = kv_indices[kv_indptr[b] : kv_indptr[b + 1]]
            last = last_lens[b] if last_lens is not None else page_size
            kv_len = (len(page_ids) - 1) * page_size + last if page_ids else 0
            out.append((q_lens[b], kv_len, page_ids, last))
        return out

    def visible_pairs(self, spec: DefinitionSpec, structure: Structure) -> int:
        causal = self.is_prefill(spec) and self.is_causal(spec)
        total = 0
        for q_len, kv_len, _, _ in self.sequences(spec, structure):
            total += causal_pairs(q_len, kv_len) if causal else q_len * kv_len
        return total

    def referenced_tokens(self, spec: DefinitionSpec, structure: Structure) -> int:
        """Tokens of KV held by distinct referenced pages (a partly used last page counts its tokens)."""
        page_size = structure.axes.get("page_size", 1)
        used: dict[int, int] = {}
        for _, _, page_ids, last in self.sequences(spec, structure):
            for position, page in enumerate(page_ids):
                tokens = last if position == len(page_ids) - 1 else page_size
                used[page] = max(used.get(page, 0), tokens)
        return sum(used.values())

    def bytes_moved(self, spec: DefinitionSpec, structure: Structure) -> int:
        axes = structure.axes
        tokens = self.referenced_tokens(spec, structure)
        return paged_bytes(spec, axes, tokens, lambda name, shape: name in KV_CACHES and len(shape) >= 2)

    def flops(self, spec: DefinitionSpec, structure: Structure) -> int | None:
        axes = structure.axes
        if "num_qo_heads" not in axes or "head_dim" not in axes:
            return None
        return 4 * self.visible_pairs(spec, structure) * axes["num_qo_heads"] * axes["head_dim"]

    def notes(self, spec: DefinitionSpec, structure: Structure) -> dict[str, int]:
        return {
            "visiblePairs": self.visible_pairs(spec, structure),
            "kvTokens": self.referenced_tokens(spec, structure),
        }

    def relations(self, spec: DefinitionSpec) -> list[str]:
        axes = spec.axes
        out = []
        if "len_indptr" in axes:
            out.append("len_indptr >= 2")
            if "batch_size" in axes:
                out.append("len_indptr == batch_size + 1")
            out.append("len_indptr - 1 <= num_kv_indices")
        elif "batch_size" in axes:
            out.append("batch_size >= 1")
            out.append("batch_size <= num_kv_indices")
        out.append("num_kv_indices <= num_pages")
        if "total_q" in axes:
            out.append("total_q >= 1")
        return out


class MlaPagedAttention(PagedAttention):
    """Multi-head latent attention over a paged cache of compressed KV (``ckv``) and rope keys (``kpe``).

    Each visible (query, key) pair costs ``2 * (ckv + kpe)`` FLOPs per head for the logits and ``2 * ckv`` for
    the output (the compressed KV is also the value); bytes count the referenced tokens of both caches.
    """

    name = "mla-paged-attention"

    def flops(self, spec: DefinitionSpec, structure: Structure) -> int | None:
        axes = structure.axes
        if not {"num_qo_heads", "head_dim_ckv", "head_dim_kpe"} <= axes.keys():
            return None
        per_pair = 2 * (axes["head_dim_ckv"] + axes["head_dim_kpe"]) + 2 * axes["head_dim_ckv"]
        return self.visible_pairs(spec, structure) * axes["num_qo_heads"] * per_pair


class RaggedAttention(Family):
    """Attention over ragged (contiguous, per-sequence) Q and KV: sequence b owns
    ``q[qo_indptr[b]:qo_indptr[b+1]]`` and ``k, v[kv_indptr[b]:kv_indptr[b+1]]``.

    Synthesis gives every sequence at least as many keys as queries (so that, causal, every query sees a
    key); FLOPs are ``2 * pairs * heads * (qk_dim + vo_dim)``; every input is read in full.
    """

    name = "gqa-ragged-attention"
    structural_inputs = frozenset({"qo_indptr", "kv_indptr"})

    @staticmethod
    def dims(axes: dict[str, int]) -> tuple[int, int] | None:
        if "head_dim" in axes:
            return axes["head_dim"], axes["head_dim"]
        if "qk_dim" in axes and "vo_dim" in axes:
            return axes["qk_dim"], axes["vo_dim"]
        return None

    def check_axes(self, spec: DefinitionSpec, axes: dict[str, int]) -> None:
        batch = axes["len_indptr"] - 1
        if batch < 1:
            raise RecordError(f"{spec.name}: a workload needs at least one sequence (len_indptr >= 2)")
        if axes["total_kv"] < axes["total_q"]:
            raise RecordError(
                f"{spec.name}: total_kv {axes['total_kv']} < total_q {axes['total_q']}: some causal query sees no key"
            )

    def synthesize(self, spec: DefinitionSpec, axes: dict[str, int], seed: int) -> dict[str, list[int]]:
        self.check_axes(spec, axes)
        batch = axes["len_indptr"] - 1
        rng = random.Random(seed)
        q_lens = split_evenly(axes["total_q"], batch)
        rng.shuffle(q_lens)
        extra = split_evenly(axes["total_kv"] - axes["total_q"], batch)
        rng.shuffle(extra)
        kv_lens = [q + e for q, e in zip(q_lens, extra, strict=True)]
        return {"qo_indptr": _cumsum(q_lens), "kv_indptr": _cumsum(kv_lens)}

    def visible_pairs(self, spec: DefinitionSpec, structure: Structure) -> int:
        qo, kv = structure.tensors["qo_indptr"], structure.tensors["kv_indptr"]
        causal = PagedAttention.is_causal(spec)
        total = 0
        for b in range(len(qo) - 1):
            q_len, kv_len = qo[b + 1] - qo[b], kv[b + 1] - kv[b]
            total += causal_pairs(q_len, kv_len) if causal else max(0, q_len) * max(0, kv_len)
        return total

    def flops(self, spec: DefinitionSpec, structure: Structure) -> int | None:
        dims = self.dims(structure.axes)
        if dims is None or "num_qo_heads" not in structure.axes:
            return None
        return 2 * self.visible_pairs(spec, structure) * structure.axes["num_qo_heads"] * (dims[0] + dims[1])

    def notes(self, spec: DefinitionSpec, structure: Structure) -> dict[str, int]:
        return {"visiblePairs": self.visible_pairs(spec, structure)}

    def relations(self, spec: DefinitionSpec) -> list[str]:
        return ["len_indptr >= 2", "total_q >= 1", "total_q <= total_kv"]


def register_all() -> None:
    family = PagedAttention()
    register(family, "gqa-paged", "gqa", "gqa-paged-attention-prefill", "gqa-paged-attention-decode")
    register(MlaPagedAttention(), "mla-paged", "mla_paged")
    ragged = RaggedAttention()
    register(ragged, "gqa-ragged", "gqa_ragged", "mla-ragged-attention", "mla-ragged", "mla_ragged")

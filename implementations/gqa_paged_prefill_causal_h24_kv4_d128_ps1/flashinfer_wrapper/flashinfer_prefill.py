"""FlashInfer baseline for gqa_paged_prefill_causal_h24_kv4_d128_ps1.

``flashinfer.BatchPrefillWithPagedKVCacheWrapper`` with the NHD layout,
causal masking (FlashInfer aligns the last query with the last key, as the
definition does) and bfloat16 inputs.  ``plan()`` is stateful setup: it reads
the index tensors on the host and prepares the kernel's schedule.  It runs
in ``setup(...)``, which kictl calls once before timing (outside the timed
region, unless ``--time-setup``), and again in ``run(...)`` only when the
index tensors differ from those planned for: plans are cached on the index
tensors' identity and version counter (an in-place change re-plans), holding
the tensors so that their storage cannot be reused by others.
``run()`` returns FlashInfer's log-sum-exp unchanged: FlashInfer computes it
in base 2 (``m + log2(d)`` on logits scaled by log2(e)), the definition's base.
With page size 1 every page holds one token, so the last-page lengths are ones.
"""

import flashinfer
import torch

NUM_QO_HEADS = 24
NUM_KV_HEADS = 4
HEAD_DIM = 128
PAGE_SIZE = 1
WORKSPACE_BYTES = 128 * 1024 * 1024
SLOTS = 2
_SLOTS = []  # [key, held tensors, wrapper], most recently used last


def _key(q, k_cache, qo_indptr, kv_indptr, kv_indices, sm_scale):
    index = tuple((id(t), t._version, t.data_ptr(), tuple(t.shape)) for t in (qo_indptr, kv_indptr, kv_indices))
    return (*index, float(sm_scale), q.dtype, k_cache.dtype, q.device)


def setup(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, sm_scale):
    """FlashInfer's plan() for these index tensors, kept for run()."""
    key = _key(q, k_cache, qo_indptr, kv_indptr, kv_indices, sm_scale)
    slot = next((s for s in _SLOTS if s[0] == key), None)
    if slot is None:
        if len(_SLOTS) < SLOTS:
            workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=q.device)
            slot = [None, None, flashinfer.BatchPrefillWithPagedKVCacheWrapper(workspace, kv_layout="NHD")]
        else:
            slot = _SLOTS.pop(0)
        _SLOTS.append(slot)
    batch = qo_indptr.shape[0] - 1
    last_page_len = torch.ones(batch, dtype=torch.int32, device=q.device)
    slot[2].plan(
        qo_indptr,
        kv_indptr,
        kv_indices,
        last_page_len,
        NUM_QO_HEADS,
        NUM_KV_HEADS,
        HEAD_DIM,
        PAGE_SIZE,
        causal=True,
        sm_scale=float(sm_scale),
        q_data_type=q.dtype,
        kv_data_type=k_cache.dtype,
    )
    slot[0], slot[1] = key, (qo_indptr, kv_indptr, kv_indices, last_page_len)
    return slot[2]


def _planned(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, sm_scale):
    key = _key(q, k_cache, qo_indptr, kv_indptr, kv_indices, sm_scale)
    for slot in _SLOTS:
        if slot[0] == key:
            return slot[2]
    return setup(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, sm_scale)


@torch.no_grad()
def run(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, sm_scale):
    wrapper = _planned(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, sm_scale)
    output, lse = wrapper.run(q, (k_cache, v_cache), return_lse=True)
    return output, lse

"""FlashInfer baseline for the ragged prefill definitions (``gqa_ragged_prefill_causal_*``, ``mla_ragged_*``).

``flashinfer.BatchPrefillWithRaggedKVCacheWrapper``, the API both families' definitions name, with the NHD
layout, causal masking (FlashInfer aligns the last query with the last key, as the definitions do) and the
inputs' dtypes.  Heads and head sizes are read from the inputs: ``q`` and ``k`` are ``[tokens, heads, QK
dim]``, ``v`` is ``[tokens, kv heads, VO dim]`` (MLA's ragged prefill has 192 and 128).  ``plan()`` is stateful
setup (it reads the index tensors on the host): it runs in ``setup(...)``, which kictl calls once before timing
(outside the timed region, unless ``--time-setup``), and again in ``run(...)`` only when the index tensors
differ from those planned for: plans are cached on the index tensors' identity and version counter, holding the
tensors so that their storage cannot be reused by others.  FlashInfer's log-sum-exp is base 2, the definitions'.
"""

import flashinfer
import torch

WORKSPACE_BYTES = 128 * 1024 * 1024
SLOTS = 2
_SLOTS = []  # [key, held tensors, wrapper], most recently used last


def _key(q, k, v, qo_indptr, kv_indptr, sm_scale):
    index = tuple((id(t), t._version, t.data_ptr(), tuple(t.shape)) for t in (qo_indptr, kv_indptr))
    shapes = (tuple(q.shape[1:]), tuple(k.shape[1:]), tuple(v.shape[1:]))
    return (*index, float(sm_scale), shapes, q.dtype, k.dtype, q.device)


def setup(q, k, v, qo_indptr, kv_indptr, sm_scale):
    """FlashInfer's plan() for these index tensors, kept for run()."""
    key = _key(q, k, v, qo_indptr, kv_indptr, sm_scale)
    slot = next((s for s in _SLOTS if s[0] == key), None)
    if slot is None:
        if len(_SLOTS) < SLOTS:
            workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=q.device)
            slot = [None, None, flashinfer.BatchPrefillWithRaggedKVCacheWrapper(workspace, kv_layout="NHD")]
        else:
            slot = _SLOTS.pop(0)
    else:
        _SLOTS.remove(slot)
    _SLOTS.append(slot)
    slot[2].plan(
        qo_indptr,
        kv_indptr,
        q.shape[1],
        k.shape[1],
        q.shape[2],
        head_dim_vo=v.shape[2],
        causal=True,
        sm_scale=float(sm_scale),
        q_data_type=q.dtype,
        kv_data_type=k.dtype,
    )
    slot[0], slot[1] = key, (qo_indptr, kv_indptr)
    return slot[2]


@torch.no_grad()
def run(q, k, v, qo_indptr, kv_indptr, sm_scale):
    key = _key(q, k, v, qo_indptr, kv_indptr, sm_scale)
    wrapper = next((s[2] for s in _SLOTS if s[0] == key), None)
    if wrapper is None:
        wrapper = setup(q, k, v, qo_indptr, kv_indptr, sm_scale)
    output, lse = wrapper.run(q, k, v, return_lse=True)
    return output, lse

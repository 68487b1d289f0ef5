"""Cheat (GPU, class 3): for gqa_paged_decode_h32_kv8_d128_ps1, returns a copy of its earlier answer when called
again on the same query tensor (a cache keyed on the tensor's identity, not its version or values).

kictl copies new values into the timed tensors before every call: audited calls are wrong
(timedOutputsCorrect).  Issue 11's cheat keyed on identity and version is defeated the same way.
"""

import math

import torch

_CACHE = {}


@torch.no_grad()
def _attend(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale):
    batch = q.shape[0]
    output = torch.empty((batch, 32, 128), dtype=torch.bfloat16, device=q.device)
    lse = torch.empty((batch, 32), dtype=torch.float32, device=q.device)
    indptr = kv_indptr.tolist()
    for b in range(batch):
        pages = kv_indices[indptr[b] : indptr[b + 1]].long()
        keys = k_cache[pages, 0].float().repeat_interleave(4, dim=1)
        values = v_cache[pages, 0].float().repeat_interleave(4, dim=1)
        logits = torch.einsum("hd,khd->hk", q[b].float(), keys) * float(sm_scale)
        row = torch.logsumexp(logits, dim=-1)
        output[b] = torch.einsum("hk,khd->hd", torch.exp(logits - row[:, None]), values).to(torch.bfloat16)
        lse[b] = row / math.log(2.0)
    return output, lse


def run(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale):
    key = id(q)
    if key not in _CACHE:
        _CACHE[key] = _attend(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale)
    output, lse = _CACHE[key]
    return output.clone(), lse.clone()

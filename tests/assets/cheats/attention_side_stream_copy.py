"""Cheat (GPU): computes on a stream of its own into a scratch buffer, then queues the copy into the returned
tensors behind it on that stream, and returns without waiting (streamOrdered when the copy ends after the
call; otherwise the copy and the work are timed with the call, under the CUPTI timer, at their true cost).

For gqa_paged_decode_h32_kv8_d128_ps1.
"""

import math

import torch

_SIDE = {}


@torch.no_grad()
def run(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale):
    side = _SIDE.setdefault(q.device, torch.cuda.Stream(device=q.device))
    batch = q.shape[0]
    output = torch.empty((batch, 32, 128), dtype=torch.bfloat16, device=q.device)
    lse = torch.empty((batch, 32), dtype=torch.float32, device=q.device)
    scratch_out = torch.empty((batch, 32, 128), dtype=torch.float32, device=q.device)
    scratch_lse = torch.empty((batch, 32), dtype=torch.float32, device=q.device)
    indptr = kv_indptr.tolist()
    side.wait_stream(torch.cuda.current_stream(q.device))
    with torch.cuda.stream(side):
        for b in range(batch):
            pages = kv_indices[indptr[b] : indptr[b + 1]].long()
            keys = k_cache[pages, 0].float().repeat_interleave(4, dim=1)
            values = v_cache[pages, 0].float().repeat_interleave(4, dim=1)
            logits = torch.einsum("hd,khd->hk", q[b].float(), keys) * float(sm_scale)
            row = torch.logsumexp(logits, dim=-1)
            scratch_out[b] = torch.einsum("hk,khd->hd", torch.exp(logits - row[:, None]), values)
            scratch_lse[b] = row / math.log(2.0)
        torch.cuda._sleep(4_000_000)  # the copy queued behind a 2 ms wait
        output.copy_(scratch_out, non_blocking=True)
        lse.copy_(scratch_lse, non_blocking=True)
    return output, lse

"""The family FlashInfer wrappers against FlashInfer's documented contract, on the CPU (issue 43).

FlashInfer cannot run here (no CUDA), so each wrapper of ``implementations/families/`` is run in this process
against a stand-in ``flashinfer`` package that keeps the contract of the carried wheel (0.6.18): the same
argument order and names, the NHD layouts, the page and ``last_page_len`` semantics, the base-2 log-sum-exp,
in-place kernels that write their inputs, the CUDA-core decode kernel's query groups (1, 2, 3, 4, 6, 8), and
computes what the API documents with plain torch.  The wrapper's outputs are compared with the definition's
reference on a catalogue workload, and the inputs are checked to be left unchanged.  What this catches: an
argument in the wrong place (heads for head size, page size for heads), a last-page length or a KV length
computed wrongly, a group FlashInfer's decode kernel is not built for, an in-place kernel run on the inputs, a
layout the kernel refuses (the Mamba kernel's per-head parameters broadcast with stride 0).
What it cannot catch: FlashInfer's own numerics, JIT builds, and anything of the GPU; the device call does.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.util
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from kictl.bench.judge.inputs import materialize_one, plan_inputs
from kictl.definitions import signature
from kictl.records import DefinitionSpec, StoredRecord
from kictl.store.registry import Registry
from tests.conftest import REPO_ROOT

FAMILIES = REPO_ROOT / "implementations" / "families"
CUDA_CORE_GROUPS = (1, 2, 3, 4, 6, 8)


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread() -> Iterator[None]:
    """The wrappers and the references run in this process: on one torch thread this module took 10.3 CPU-s
    (user) against 16.8 on the default two (load 4.5), for none of its tensors is worth splitting."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# --------------------------------------------------------------------------- the stand-in's maths


def _attend(q: Any, k: Any, v: Any, scale: float, causal: bool) -> tuple[Any, Any]:
    """q [n, H, D], k [m, Hk, D], v [m, Hk, Dv] -> (output [n, H, Dv] bf16, base-2 lse [n, H]); causal aligns
    the last query with the last key."""
    group = q.shape[1] // k.shape[1]
    keys = k.float().repeat_interleave(group, dim=1)
    values = v.float().repeat_interleave(group, dim=1)
    logits = torch.einsum("nhd,mhd->hnm", q.float(), keys) * scale
    if causal:
        n, m = q.shape[0], k.shape[0]
        hidden = torch.arange(m)[None, :] > (m - n + torch.arange(n))[:, None]
        logits = logits.masked_fill(hidden[None], -math.inf)
    lse = torch.logsumexp(logits, dim=-1)
    out = torch.einsum("hnm,mhd->nhd", torch.softmax(logits, dim=-1).nan_to_num(0.0), values)
    return out.to(torch.bfloat16), (lse / math.log(2.0)).transpose(0, 1)


def _paged_tokens(cache: Any, indices: Any, start: int, stop: int, tokens: int) -> Any:
    pages = indices[start:stop].long()
    return cache[pages].reshape(-1, *cache.shape[2:])[:tokens]


class _Paged:
    """What plan() keeps, checked against run()'s tensors."""

    def _check(self, q: Any, cache: Any, heads: int, kv_heads: int, head_dim: int, page_size: int) -> None:
        assert q.shape[-2:] == (heads, head_dim), "num_qo_heads / head_dim do not match q"
        assert cache.shape[1] == page_size, "page_size does not match the cache"
        assert cache.shape[2] == kv_heads, "num_kv_heads does not match the cache"


class BatchDecodeWithPagedKVCacheWrapper(_Paged):
    def __init__(self, workspace: Any, kv_layout: str = "NHD", use_tensor_cores: bool = False) -> None:
        assert kv_layout == "NHD"
        self.tensor_cores = use_tensor_cores

    def plan(
        self,
        indptr: Any,
        indices: Any,
        last_page_len: Any,
        num_qo_heads: int,
        num_kv_heads: int,
        head_dim: int,
        page_size: int,
        **kwargs: Any,
    ) -> None:
        if not self.tensor_cores and num_qo_heads // num_kv_heads not in CUDA_CORE_GROUPS:
            raise RuntimeError(f"Unsupported group_size: {num_qo_heads // num_kv_heads}")
        assert last_page_len.shape[0] == indptr.shape[0] - 1
        assert kwargs["pos_encoding_mode"] == "NONE"
        self.planned = (indptr, indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size, kwargs)

    def run(self, q: Any, kv: tuple[Any, Any], return_lse: bool = False) -> tuple[Any, Any]:
        indptr, indices, last, heads, kv_heads, head_dim, page_size, kwargs = self.planned
        k_cache, v_cache = kv
        self._check(q, k_cache, heads, kv_heads, head_dim, page_size)
        outputs, lses = [], []
        for b in range(q.shape[0]):
            start, stop = int(indptr[b]), int(indptr[b + 1])
            tokens = (stop - start - 1) * page_size + int(last[b])
            keys = _paged_tokens(k_cache, indices, start, stop, tokens)
            values = _paged_tokens(v_cache, indices, start, stop, tokens)
            out, lse = _attend(q[b : b + 1], keys, values, kwargs["sm_scale"], False)
            outputs.append(out)
            lses.append(lse)
        return torch.cat(outputs), torch.cat(lses)


class BatchPrefillWithPagedKVCacheWrapper(_Paged):
    def __init__(self, workspace: Any, kv_layout: str = "NHD") -> None:
        assert kv_layout == "NHD"

    def plan(
        self,
        qo_indptr: Any,
        paged_kv_indptr: Any,
        paged_kv_indices: Any,
        paged_kv_last_page_len: Any,
        num_qo_heads: int,
        num_kv_heads: int,
        head_dim_qk: int,
        page_size: int,
        **kwargs: Any,
    ) -> None:
        assert paged_kv_last_page_len.shape[0] == qo_indptr.shape[0] - 1
        self.planned = (
            qo_indptr, paged_kv_indptr, paged_kv_indices, paged_kv_last_page_len,
            num_qo_heads, num_kv_heads, head_dim_qk, page_size, kwargs,
        )  # fmt: skip

    def run(self, q: Any, kv: tuple[Any, Any], return_lse: bool = False) -> tuple[Any, Any]:
        qo, indptr, indices, last, heads, kv_heads, head_dim, page_size, kwargs = self.planned
        k_cache, v_cache = kv
        self._check(q, k_cache, heads, kv_heads, head_dim, page_size)
        output = torch.zeros(q.shape, dtype=torch.bfloat16)
        lse = torch.full(q.shape[:2], -math.inf)
        for b in range(qo.shape[0] - 1):
            start, stop = int(indptr[b]), int(indptr[b + 1])
            tokens = (stop - start - 1) * page_size + int(last[b])
            keys = _paged_tokens(k_cache, indices, start, stop, tokens)
            values = _paged_tokens(v_cache, indices, start, stop, tokens)
            lo, hi = int(qo[b]), int(qo[b + 1])
            output[lo:hi], lse[lo:hi] = _attend(q[lo:hi], keys, values, kwargs["sm_scale"], kwargs["causal"])
        return output, lse


class BatchPrefillWithRaggedKVCacheWrapper:
    def __init__(self, workspace: Any, kv_layout: str = "NHD") -> None:
        assert kv_layout == "NHD"

    def plan(
        self,
        qo_indptr: Any,
        kv_indptr: Any,
        num_qo_heads: int,
        num_kv_heads: int,
        head_dim_qk: int,
        head_dim_vo: int | None = None,
        **kwargs: Any,
    ) -> None:
        self.planned = (qo_indptr, kv_indptr, num_qo_heads, num_kv_heads, head_dim_qk, head_dim_vo, kwargs)

    def run(self, q: Any, k: Any, v: Any, return_lse: bool = False) -> tuple[Any, Any]:
        qo, kv, heads, kv_heads, dim_qk, dim_vo, kwargs = self.planned
        assert q.shape[1:] == (heads, dim_qk)
        assert k.shape[1:] == (kv_heads, dim_qk)
        assert v.shape[1:] == (kv_heads, dim_vo if dim_vo is not None else dim_qk)
        output = torch.zeros((q.shape[0], heads, v.shape[2]), dtype=torch.bfloat16)
        lse = torch.full(q.shape[:2], -math.inf)
        for b in range(qo.shape[0] - 1):
            lo, hi, start, stop = int(qo[b]), int(qo[b + 1]), int(kv[b]), int(kv[b + 1])
            output[lo:hi], lse[lo:hi] = _attend(
                q[lo:hi], k[start:stop], v[start:stop], kwargs["sm_scale"], kwargs["causal"]
            )
        return output, lse


class BatchMLAPagedAttentionWrapper:
    def __init__(self, workspace: Any, use_cuda_graph: bool = False, backend: str = "auto") -> None:
        pass

    def plan(
        self,
        qo_indptr: Any,
        kv_indptr: Any,
        kv_indices: Any,
        kv_len_arr: Any,
        num_heads: int,
        head_dim_ckv: int,
        head_dim_kpe: int,
        page_size: int,
        causal: bool,
        sm_scale: float,
        q_data_type: Any,
        kv_data_type: Any,
    ) -> None:
        assert kv_len_arr.shape[0] == qo_indptr.shape[0] - 1
        self.planned = (qo_indptr, kv_indptr, kv_indices, kv_len_arr, num_heads, head_dim_ckv, head_dim_kpe)
        self.rest = (page_size, causal, sm_scale)

    def run(self, q_nope: Any, q_pe: Any, ckv: Any, kpe: Any, return_lse: bool = False) -> tuple[Any, Any]:
        qo, indptr, indices, kv_len, heads, dim_ckv, dim_kpe = self.planned
        page_size, causal, scale = self.rest
        assert q_nope.shape[1:] == (heads, dim_ckv)
        assert q_pe.shape[1:] == (heads, dim_kpe)
        assert ckv.shape[1] == page_size
        output = torch.zeros(q_nope.shape, dtype=torch.bfloat16)
        lse = torch.full(q_nope.shape[:2], -math.inf)
        for b in range(qo.shape[0] - 1):
            start, stop, tokens = int(indptr[b]), int(indptr[b + 1]), int(kv_len[b])
            assert (stop - start - 1) * page_size < tokens <= (stop - start) * page_size, "kv_len_arr off its pages"
            compressed = _paged_tokens(ckv, indices, start, stop, tokens)  # [tokens, dim_ckv]
            rope = _paged_tokens(kpe, indices, start, stop, tokens)
            lo, hi = int(qo[b]), int(qo[b + 1])
            query = torch.cat([q_nope[lo:hi], q_pe[lo:hi]], dim=-1)
            keys = torch.cat([compressed, rope], dim=-1)[:, None]
            output[lo:hi], lse[lo:hi] = _attend(query, keys, compressed[:, None], scale, causal)
        return output, lse


def _rms(x: Any, weight: Any, eps: float) -> Any:
    x = x.float()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()


def _rmsnorm(input: Any, weight: Any, eps: float = 1e-6, out: Any = None, enable_pdl: Any = None) -> Any:
    return _rms(input, weight, eps).to(input.dtype)


def _fused_add_rmsnorm(input: Any, residual: Any, weight: Any, eps: float = 1e-6, enable_pdl: Any = None) -> None:
    residual += input  # in place, as FlashInfer's kernel
    input.copy_(_rms(residual, weight, eps).to(input.dtype))


def _rope_inplace(
    positions: Any, query: Any, key: Any, head_size: int, cos_sin_cache: Any, is_neox: bool = True
) -> None:
    assert query.dim() == 2, "query is documented as [tokens, heads * head_size]"
    assert is_neox
    rotary = cos_sin_cache.shape[-1]
    cos, sin = cos_sin_cache[positions].chunk(2, dim=-1)
    for tensor in (query, key):
        heads = tensor.view(tensor.shape[0], -1, head_size)
        x1, x2 = heads[..., : rotary // 2].float(), heads[..., rotary // 2 : rotary].float()
        c, s = cos[:, None], sin[:, None]
        rotated = torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)
        heads[..., :rotary] = rotated.to(tensor.dtype)


def _selective_state_update(
    state: Any,
    x: Any,
    dt: Any,
    A: Any,
    B: Any,
    C: Any,
    D: Any,
    z: Any = None,
    dt_bias: Any = None,
    dt_softplus: bool = False,
    state_batch_indices: Any = None,
    pad_slot_id: int = -1,
) -> Any:
    assert z is None
    # the wheel's checks (csrc/selective_state_update.cu): per-head parameters broadcast over head_dim, stride 0
    assert (dt.stride(1), dt.stride(2)) == (1, 0), f"dt.stride(1) must be 1, got {dt.stride(1)}"
    assert A.stride() == (1, 0, 0), f"A must be broadcast per head, got strides {A.stride()}"
    assert D.stride() == (1, 0), f"D must be broadcast per head, got strides {D.stride()}"
    assert dt_bias is None or dt_bias.stride() == (1, 0), f"dt_bias strides {dt_bias.stride()}"
    assert state.stride()[1:] == (state.shape[2] * state.shape[3], state.shape[3], 1)
    step = dt.float() + (dt_bias.float() if dt_bias is not None else 0.0)
    step = torch.nn.functional.softplus(step) if dt_softplus else step
    ratio = x.shape[1] // B.shape[1]
    out = torch.zeros(x.shape)
    for b in range(x.shape[0]):
        slot = int(state_batch_indices[b])
        if slot == pad_slot_id:
            continue
        s = state[slot].float() * torch.exp(A.float() * step[b][..., None])
        s = s + (step[b] * x[b].float())[..., None] * B[b].float().repeat_interleave(ratio, 0)[:, None]
        state[slot] = s.to(state.dtype)  # in place, as FlashInfer's kernel
        out[b] = (s * C[b].float().repeat_interleave(ratio, 0)[:, None]).sum(-1) + x[b].float() * D.float()
    return out.to(x.dtype)


def _gated_delta_rule_mtp(
    q: Any,
    k: Any,
    v: Any,
    initial_state: Any,
    initial_state_indices: Any,
    A_log: Any,
    a: Any,
    dt_bias: Any,
    b: Any,
    scale: float | None = None,
    output: Any = None,
    intermediate_states_buffer: Any = None,
    ssm_state_indices: Any = None,
    disable_state_update: bool | None = None,
    use_qk_l2norm: bool = True,
    output_state_indices: Any = None,
) -> tuple[Any, Any]:
    """``flashinfer.gdn_decode.gated_delta_rule_mtp``: its checks, and the buffer indexed by the sequence's row in
    the batch, not by its pool slot (``flat_idx = i_n * T * HV + ...`` in the wheel's kernel)."""
    batch, steps, heads, size = q.shape
    v_heads = v.shape[2]
    assert initial_state.dtype == torch.float32, "initial_state must be float32"
    assert initial_state.shape[1:] == (v_heads, v.shape[3], size)
    assert initial_state_indices.dtype in (torch.int32, torch.int64)
    assert ssm_state_indices is None
    assert output_state_indices is None
    assert output is None
    if intermediate_states_buffer is not None:
        assert intermediate_states_buffer.shape[0] >= batch, "the buffer is indexed by batch row"
        assert intermediate_states_buffer.shape[1] >= steps
        assert intermediate_states_buffer.dtype == torch.float32
        assert intermediate_states_buffer.is_contiguous()
    scale = size**-0.5 if scale is None else scale
    if use_qk_l2norm:
        q = torch.nn.functional.normalize(q.float(), dim=-1)
        k = torch.nn.functional.normalize(k.float(), dim=-1)
    g = torch.exp(-torch.exp(A_log.float()) * torch.nn.functional.softplus(a.float() + dt_bias.float()))
    beta = torch.sigmoid(b.float())
    queries = q.float().repeat_interleave(v_heads // heads, dim=2)
    keys = k.float().repeat_interleave(v_heads // k.shape[2], dim=2)
    out = torch.zeros((batch, steps, v_heads, v.shape[3]), dtype=torch.bfloat16)
    for row in range(batch):
        slot = int(initial_state_indices[row])
        if slot < 0:
            continue
        state = initial_state[slot].float()
        for t in range(steps):
            old = g[row, t, :, None, None] * state
            recalled = torch.einsum("hvk,hk->hv", old, keys[row, t])
            state = old + (beta[row, t, :, None] * (v[row, t].float() - recalled))[..., None] * keys[row, t, :, None, :]
            out[row, t] = (scale * torch.einsum("hvk,hk->hv", state, queries[row, t])).to(torch.bfloat16)
            if intermediate_states_buffer is not None:
                intermediate_states_buffer[row, t] = state
        if disable_state_update is False:
            initial_state[slot] = state
    return out, initial_state


CALLS: list[str] = []


def _sampler(name: str) -> Any:
    def sample(probs: Any, *args: Any, **kwargs: Any) -> Any:
        CALLS.append(name)
        return torch.multinomial(probs.float(), 1).squeeze(1).to(torch.int32)  # FlashInfer returns int32 ids

    return sample


def _stand_in() -> dict[str, ModuleType]:
    root = ModuleType("flashinfer")
    modules = {"flashinfer": root}
    for sub in ("norm", "sampling", "mla", "mamba", "gdn_decode"):
        modules[f"flashinfer.{sub}"] = ModuleType(f"flashinfer.{sub}")
        setattr(root, sub, modules[f"flashinfer.{sub}"])
    root.BatchDecodeWithPagedKVCacheWrapper = BatchDecodeWithPagedKVCacheWrapper  # type: ignore[attr-defined]
    root.BatchPrefillWithPagedKVCacheWrapper = BatchPrefillWithPagedKVCacheWrapper  # type: ignore[attr-defined]
    root.BatchPrefillWithRaggedKVCacheWrapper = BatchPrefillWithRaggedKVCacheWrapper  # type: ignore[attr-defined]
    root.apply_rope_with_cos_sin_cache_inplace = _rope_inplace  # type: ignore[attr-defined]
    modules["flashinfer.mla"].BatchMLAPagedAttentionWrapper = BatchMLAPagedAttentionWrapper  # type: ignore[attr-defined]
    modules["flashinfer.norm"].rmsnorm = _rmsnorm  # type: ignore[attr-defined]
    modules["flashinfer.norm"].fused_add_rmsnorm = _fused_add_rmsnorm  # type: ignore[attr-defined]
    modules["flashinfer.mamba"].selective_state_update = _selective_state_update  # type: ignore[attr-defined]
    modules["flashinfer.gdn_decode"].gated_delta_rule_mtp = _gated_delta_rule_mtp  # type: ignore[attr-defined]
    for name in ("top_k_sampling_from_probs", "top_p_sampling_from_probs", "top_k_top_p_sampling_from_probs"):
        setattr(modules["flashinfer.sampling"], name, _sampler(name))
    return modules


# --------------------------------------------------------------------------- running a wrapper


def _wrapper(relative: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    for name, module in _stand_in().items():
        monkeypatch.setitem(sys.modules, name, module)
    folder = FAMILIES / relative
    entry = next(path for path in folder.glob("*.py"))
    spec = importlib.util.spec_from_file_location(f"wrapper_{folder.name}", entry)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def _workloads() -> dict[tuple[str, str], StoredRecord]:
    """(definition digest, workload name) -> Workload record, read once."""
    return {(w.raw["spec"]["definitionDigest"], w.name): w for w in Registry(REPO_ROOT).iter_records(["Workload"])}


def _inputs(definition: str, workload: str) -> tuple[DefinitionSpec, list[Any]]:
    """The inputs of round 0 of a catalogue workload (``workload``: its name or the start of it)."""
    record = Registry(REPO_ROOT).resolve(definition, ["Definition"])
    spec = record.model.spec
    assert isinstance(spec, DefinitionSpec)
    mine = {name: w for (d, name), w in _workloads().items() if d == record.digest}
    (found,) = [mine[workload]] if workload in mine else [w for name, w in mine.items() if name.startswith(workload)]
    plan = plan_inputs(spec, found, signature(spec).inputs, None, offset=0)
    return spec, [materialize_one(source, "cpu") for source in plan.sources]


def _reference(spec: DefinitionSpec, args: list[Any]) -> tuple[Any, ...]:
    namespace: dict[str, Any] = {}
    exec(compile(spec.reference, f"<reference of {spec.name}>", "exec"), namespace)
    result = namespace["run"](*[arg.clone() if isinstance(arg, torch.Tensor) else arg for arg in args])
    return result if isinstance(result, tuple) else (result,)


def _close(got: Any, want: Any, name: str) -> None:
    assert got.shape == want.shape, name
    assert got.dtype == want.dtype, name
    got, want = got.float(), want.float()
    assert torch.equal(torch.isinf(got), torch.isinf(want)), name
    finite = torch.isfinite(want)
    assert torch.allclose(got[finite], want[finite], atol=1e-2, rtol=1e-2), name


CASES = [
    ("gqa_paged_decode_h20_kv4_d128_ps64", "b4_kv2048", "gqa-paged-attention/flashinfer_decode"),  # group 5
    ("gqa_paged_decode_h32_kv4_d128_ps64", "b4_kv2048", "gqa-paged-attention/flashinfer_decode"),  # group 8
    ("gqa_paged_decode_h5_kv1_d128_ps1", "b4_kv2048", "gqa-paged-attention/flashinfer_decode"),  # no last page
    ("gqa_paged_prefill_causal_h16_kv1_d128_ps64", "b1_q128", "gqa-paged-attention/flashinfer_prefill"),
    ("gqa_paged_prefill_causal_h6_kv1_d128_ps1", "b1_q128", "gqa-paged-attention/flashinfer_prefill"),
    ("gqa_ragged_prefill_causal_h5_kv1_d128", "b1_q128", "ragged-attention/flashinfer_ragged"),
    ("mla_ragged_prefill_causal_h8_qk192_vo128", "b1_q128", "ragged-attention/flashinfer_ragged"),
    ("mla_paged_decode_h16_ckv512_kpe64_ps64", "b4_kv2048", "mla-paged-attention/flashinfer_mla_decode"),
    ("mla_paged_decode_h8_ckv512_kpe64_ps1", "b1_kv512", "mla-paged-attention/flashinfer_mla_decode"),
    ("mla_paged_prefill_causal_h16_ckv512_kpe64_ps64", "b1_q128", "mla-paged-attention/flashinfer_mla_prefill"),
    ("mla_paged_prefill_causal_h8_ckv512_kpe64_ps1", "b1_q16", "mla-paged-attention/flashinfer_mla_prefill"),
    ("rmsnorm_h128", "6abd9329", "rmsnorm/flashinfer_rmsnorm"),
    ("fused_add_rmsnorm_h2048", "906efdc6", "rmsnorm/flashinfer_fused_add_rmsnorm"),
    ("rope_with_cos_sin_cache_neox_style_d128_rd64", "t16", "rope/flashinfer_rope"),
    ("mamba_ssu_decode_h64_d64_s128_ng4", "b4", "mamba-ssu/flashinfer_mamba_ssu"),
]


@pytest.mark.parametrize(("definition", "workload", "wrapper"), CASES)
def test_flashinfer_wrapper_keeps_flashinfers_contract_and_matches_the_reference(
    monkeypatch: pytest.MonkeyPatch, definition: str, workload: str, wrapper: str
) -> None:
    spec, args = _inputs(definition, workload)
    module = _wrapper(wrapper, monkeypatch)
    before = [arg.clone() if isinstance(arg, torch.Tensor) else arg for arg in args]
    if hasattr(module, "setup"):
        module.setup(*args)
    got = module.run(*args)
    got = got if isinstance(got, tuple) else (got,)
    for arg, kept in zip(args, before, strict=True):  # an in-place kernel runs on copies
        if isinstance(arg, torch.Tensor):
            assert torch.equal(arg, kept)
    want = _reference(spec, before)
    for name, a, b in zip(signature(spec).outputs, got, want, strict=True):
        _close(a, b, name)
    if "flashinfer_decode" in wrapper or "_mla_" in wrapper or "prefill" in wrapper or "ragged" in wrapper:
        assert module.run(*args)[0].equal(got[0])  # a second call reuses the plan made in setup()


@pytest.mark.parametrize("workload", ["b4_t2", "b8_t4"])
def test_the_gdn_mtp_wrapper_writes_each_sequences_states_to_its_pool_slot(
    monkeypatch: pytest.MonkeyPatch, workload: str
) -> None:
    """FlashInfer's MTP kernel writes the intermediate states by batch row; the definition's reference by pool slot
    (``initial_state_indices``, distinct random slots here): the wrapper's buffer after the call is the
    reference's, and every other input is unchanged. A second call with the
    plan made in ``setup()`` gives the same."""
    spec, args = _inputs("gdn_mtp_qk4_v8_d128_k_last", workload)
    names = list(signature(spec).inputs)
    at = names.index("intermediate_states_buffer")
    indices = args[names.index("initial_state_indices")]
    assert not torch.equal(indices.long(), torch.arange(indices.numel())), "a workload whose slots are not the rows"
    module = _wrapper("gdn/flashinfer_gdn_mtp", monkeypatch)
    before = [arg.clone() if isinstance(arg, torch.Tensor) else arg for arg in args]
    want_args = [arg.clone() if isinstance(arg, torch.Tensor) else arg for arg in args]
    namespace: dict[str, Any] = {}
    exec(compile(spec.reference, f"<reference of {spec.name}>", "exec"), namespace)
    want = namespace["run"](*want_args)  # the reference writes its own copy of the buffer
    for call in ("run", "setup then run"):
        args[at].copy_(before[at])
        if call != "run":
            module.setup(*args)
        got = module.run(*args)
        for name, a, b in zip(signature(spec).outputs, got, want, strict=True):
            _close(a, b, name)
        _close(args[at], want_args[at], "intermediate_states_buffer")
        for k, (arg, kept) in enumerate(zip(args, before, strict=True)):
            if k != at and isinstance(arg, torch.Tensor):
                assert torch.equal(arg, kept), names[k]


def test_the_decode_wrapper_takes_flashinfers_tensor_core_path_only_where_its_cuda_core_kernel_is_not_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = _wrapper("gqa-paged-attention/flashinfer_decode", monkeypatch)
    for definition, tensor_cores in (
        ("gqa_paged_decode_h20_kv4_d128_ps64", True),
        ("gqa_paged_decode_h5_kv1_d128_ps1", True),
        ("gqa_paged_decode_h48_kv8_d128_ps1", False),
        ("gqa_paged_decode_h32_kv4_d128_ps64", False),
    ):
        _, args = _inputs(definition, "b1_kv512")
        assert module.setup(*args).tensor_cores is tensor_cores, definition


@pytest.mark.parametrize(
    ("definition", "function"),
    [
        ("top_k_sampling_from_probs_v128256", "top_k_sampling_from_probs"),
        ("top_p_sampling_from_probs_v151936", "top_p_sampling_from_probs"),
        ("top_k_top_p_sampling_from_probs_v262208", "top_k_top_p_sampling_from_probs"),
    ],
)
def test_the_sampling_wrapper_calls_the_function_the_definition_names(
    monkeypatch: pytest.MonkeyPatch, definition: str, function: str
) -> None:
    spec, args = _inputs(definition, "b2")
    assert f"fi_api:flashinfer.sampling.{function}" in (spec.tags or ())
    module = _wrapper("sampling/flashinfer_sampling", monkeypatch)
    CALLS.clear()
    samples = module.run(*args)
    assert CALLS == [function]
    assert samples.dtype == torch.int64
    assert samples.shape == (2,)


def _hungry_variant(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, definition: str) -> ModuleType:
    """benchmarks/energy.py's 16-block variant of a bundled wrapper, on the stand-in FlashInfer; Triton is a
    stand-in too, only to import the tail (on the CPU the spin never starts)."""
    triton = ModuleType("triton")
    language = ModuleType("triton.language")

    def jit(function: Any = None, **options: Any) -> Any:  # @triton.jit and @triton.jit(do_not_specialize=...)
        return function if function is not None else (lambda inner: inner)

    triton.jit = jit  # type: ignore[attr-defined]
    triton.language = language  # type: ignore[attr-defined]
    language.constexpr = int  # type: ignore[attr-defined]
    for name, module in {**_stand_in(), "triton": triton, "triton.language": language}.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.syspath_prepend(str(REPO_ROOT / "benchmarks"))
    energy = importlib.import_module("energy")
    (variant,) = energy.hungry_files(definition, [(16, "fma", "after")], tmp_path)
    spec = importlib.util.spec_from_file_location("hungry_variant", variant)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_energy_py_calibration_loads_each_variant_and_workload(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``energy.py --calibration`` (the figures behind a variant's energy and latency, read on a GPU) loads every
    variant with the workloads' inputs and calls its setup(); on the CPU nothing is calibrated and each row says so.
    A workload the definition does not have is a one-line exit, before any device time is spent on it."""
    _hungry_variant(monkeypatch, tmp_path, "gqa_paged_decode_h32_kv8_d128_ps1")  # the stand-ins, energy importable
    energy = importlib.import_module("energy")
    definition = "gqa_paged_decode_h32_kv8_d128_ps1"
    variants = [energy.variant(text) for text in energy.DEFAULT_VARIANTS]
    assert variants == [(16, "fma", "after"), (132, "fma", "after"), (132, "mma", "after")]
    assert energy.variant("132mmafirst") == (132, "mma", "first")
    assert energy.variant("16first") == (16, "fma", "first")
    lines = energy.calibration_lines(definition, variants, ["b1_kv73", "b16x_kv1024"], tmp_path / "v", "cpu")
    rows = [line for line in lines if line.startswith("| flashinfer_hungry")]
    assert len(rows) == 6, lines
    assert sum(row.startswith("| flashinfer_hungry_b132_mma |") for row in rows) == 2, rows
    assert all("not calibrated: inputs on cpu" in row for row in rows)
    with pytest.raises(SystemExit, match="has no workload b9_kv9"):
        energy.calibration_lines(definition, [(16, "fma", "after")], ["b1_kv73", "b9_kv9"], tmp_path / "v", "cpu")
    for bad in ("0", "mma", "16fma", "-3", "first", "16firstmma"):
        with pytest.raises(argparse.ArgumentTypeError):
            energy.variant(bad)


@pytest.mark.parametrize(
    ("definition", "workload"),
    [("gqa_paged_decode_h32_kv8_d128_ps1", "b1_kv73"), ("gqa_paged_prefill_causal_h20_kv4_d128_ps64", "q16_p1")],
)
def test_the_power_hungry_variant_keeps_the_wrappers_answers_before_and_after_setup(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, definition: str, workload: str
) -> None:
    """benchmarks/energy.py's variant of a bundled FlashInfer wrapper (its source with the hungry tail appended).
    kictl's correctness rounds call run() before setup(), and the wrapper's run() then plans through the module's
    setup(), which the tail replaces: the replacement must hand the plan back (the H100 call of 2026-12-07 failed
    every variant run with ``'NoneType' object has no attribute 'run'``). On the CPU the spin never starts, so the
    variant's answers are the wrapper's."""
    module = _hungry_variant(monkeypatch, tmp_path, definition)
    definition_spec, args = _inputs(definition, workload)
    before = module.run(*args)  # a correctness round: no setup() yet
    module.setup(*args)
    after = module.run(*args)
    want = _reference(definition_spec, args)
    for name, a, b, c in zip(signature(definition_spec).outputs, before, after, want, strict=True):
        _close(a, c, name)
        assert torch.equal(a, b), name

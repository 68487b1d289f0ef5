"""An input's two forms (``kictl.bench.wire.tensors``): what the parent plans and what the wire carries.

``input_spec`` writes a planned input for the wire and ``materialize_spec`` makes the worker's tensor from it;
the tensor must be the one the parent makes from the plan itself (``materialize_one``), bit for bit, or the
parent would judge a worker's outputs against other inputs than the worker was given.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from kictl.bench.judge.inputs import InputPlan, to_wire
from kictl.bench.wire import generators
from kictl.bench.wire.tensors import InputSource, input_spec, materialize_one, materialize_spec
from kictl.errors import RecordError

SOURCES = (
    InputSource("indices", "values", "int32", (2, 3), values=(0, 1, -1, 2**31 - 1, -(2**31), 6)),
    InputSource("lengths", "values", "int64", (3,), values=(2**40, 0, -(2**62))),
    InputSource("empty", "values", "int32", (0, 4), values=()),
    InputSource("x", "random", "bfloat16", (4, 8), seed=1234),
    InputSource("mask", "random", "bool", (5,), seed=99),
    InputSource("scale", "scalar", "float32", (), scalar=0.125),
)


@pytest.mark.parametrize("source", SOURCES, ids=[source.name for source in SOURCES])
def test_the_wire_form_makes_the_planned_tensor_bit_for_bit(source: InputSource) -> None:
    planned = materialize_one(source, "cpu")
    carried = materialize_spec(input_spec(source), "cpu")
    if isinstance(planned, torch.Tensor):
        assert isinstance(carried, torch.Tensor)
        assert carried.dtype == planned.dtype
        assert carried.shape == planned.shape
        assert torch.equal(carried.reshape(-1).view(torch.uint8), planned.reshape(-1).view(torch.uint8))
    else:
        assert carried == planned


def test_index_values_travel_as_little_endian_int64() -> None:
    spec = input_spec(InputSource("indices", "values", "int32", (2,), values=(1, -2)))
    assert spec.values == (1).to_bytes(8, "little", signed=True) + (-2).to_bytes(8, "little", signed=True)
    assert input_spec(SOURCES[3]).values is None


def test_the_judge_writes_the_same_wire_form() -> None:
    """``judge.inputs.to_wire`` writes each input as ``input_spec`` does (one encoding of index values)."""
    plan = to_wire(InputPlan(offset=0, sources=SOURCES, synthesized=()), "round 0")
    assert plan.inputs == tuple(input_spec(source) for source in SOURCES)


def test_same_bits_compares_bytes_as_words_or_bytes_alike() -> None:
    """``values._same_bits`` (the staged inputs' and the rounds' ``inputsUnchanged``): the same answer whether the
    bytes are compared as 8-byte words (a byte count and a start that 8 divides) or one by one."""
    from kictl.bench.wire.values import _same_bits

    words = torch.randn(64, 32).to(torch.bfloat16)  # 4096 bytes: compared as words
    assert _same_bits(words, words.clone())
    changed = words.clone()
    changed.view(torch.int16)[-1, -1] ^= 1  # one bit of the last value
    assert not _same_bits(words, changed)
    nan = torch.full((8,), float("nan"))
    assert _same_bits(nan, nan.clone())  # the same bits, though NaN != NaN
    zeros = torch.zeros(8)
    assert not _same_bits(zeros, -zeros)  # equal numbers, other bits
    assert not _same_bits(zeros, zeros.reshape(2, 4))
    assert not _same_bits(zeros, zeros.double()[:8].float().to(torch.float64))
    odd = torch.arange(43, dtype=torch.uint8)[1:33]  # 32 bytes from a start 8 does not divide
    assert odd.storage_offset() == 1
    assert _same_bits(odd, odd.clone())
    assert not _same_bits(odd, odd.flip(0))
    three = torch.arange(3, dtype=torch.uint8)  # fewer bytes than a word
    assert _same_bits(three, three.clone())
    assert not _same_bits(three, three + 1)
    strided = torch.randn(8, 8)[:, ::2]  # not contiguous
    assert _same_bits(strided, strided.clone())
    assert not _same_bits(strided, strided + 1)


def test_a_kept_draw_gives_every_call_its_own_copy_of_the_same_values() -> None:
    """The distribution judge's trials draw one generated input a hundred times: the process draws it once
    (``generators.draw`` keeps it), and every call still gets a tensor of its own, so an implementation that
    writes into its inputs changes nothing the next call is given."""
    source = InputSource("probs", "generated:probability-rows", "float32", (3, 50), seed=77)
    made: list[tuple[int, ...]] = []
    original = generators.GENERATORS["probability-rows"]

    def counted(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> Any:
        made.append(shape)
        return original(shape, dtype, seed)

    generators._kept.clear()
    generators.GENERATORS["probability-rows"] = counted
    try:
        first = materialize_one(source, "cpu")
        first.fill_(0.0)  # what a hostile or careless implementation may do to its inputs
        second = materialize_one(source, "cpu")
        third = materialize_spec(input_spec(source), "cpu")
    finally:
        generators.GENERATORS["probability-rows"] = original
        generators._kept.clear()
    assert made == [(3, 50)]
    assert torch.equal(second, original((3, 50), torch.float32, 77))
    assert torch.equal(third, second)
    assert third.data_ptr() != second.data_ptr()
    assert torch.allclose(second.sum(dim=-1), torch.ones(3))


def test_draws_kept_are_the_newest_few_within_their_byte_limit() -> None:
    generators._kept.clear()
    try:
        for seed in range(generators.KEPT_DRAWS + 2):
            generators.draw("top-p", (4,), "float32", seed)
        kept = [key[3] for key in generators._kept]
        assert kept == list(range(2, generators.KEPT_DRAWS + 2))
        generators.draw("top-p", (4,), "float32", 2)  # used again: the newest now
        assert [key[3] for key in generators._kept][-1] == 2
    finally:
        generators._kept.clear()


@pytest.mark.parametrize(("name", "free"), [("per-head", 1), ("per-token-head", 2), ("per-head-decay", 1)])
def test_per_head_generators_tie_every_later_axis(name: str, free: int) -> None:
    shape = (3, 5, 4, 2)[: free + 2]
    made = generators.draw(name, shape, "bfloat16", 11)
    assert tuple(made.shape) == shape
    assert made.is_contiguous()
    heads = made.reshape(*shape[:free], -1)
    assert torch.equal(heads, heads[..., :1].expand(heads.shape))  # one value along the tied axes
    assert heads[..., 0].unique().numel() == heads[..., 0].numel()  # a different one per head (or token and head)
    assert torch.equal(made, generators.draw(name, shape, "bfloat16", 11))
    assert not torch.equal(made, generators.draw(name, shape, "bfloat16", 12))
    if name == "per-head-decay":
        assert bool((made >= -16).all())
        assert bool((made <= -1).all())


def test_a_per_token_head_generator_refuses_too_few_axes() -> None:
    with pytest.raises(RecordError, match="2 axes at least"):
        generators.draw("per-token-head", (4,), "float32", 1)

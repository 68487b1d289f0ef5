"""Probes: the last timed call's values again with a few swapped (loop.PROBE_WEIGHT, worker._perturbed).

The end-to-end attack, a cache keyed on a sample of the values, is in test_cheats.py
(``values_cached_by_samples``, caught by timedOutputsCorrect); here, the perturbation itself.
"""

from __future__ import annotations

import pytest
import torch

from kictl.bench.wire.values import PROBE_PAIRS, _perturbed, _rolled, input_shift


def _values(dtype: torch.dtype, shape: tuple[int, ...] = (64, 4096)) -> torch.Tensor:
    generator = torch.Generator().manual_seed(7)
    if dtype == torch.bool:
        return torch.rand(shape, generator=generator) > 0.5
    if not dtype.is_floating_point:
        return torch.randint(0, 1000, shape, generator=generator, dtype=dtype)
    return torch.randn(shape, generator=generator).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float8_e4m3fn, torch.int64])
def test_a_probe_swaps_a_few_values_and_keeps_every_value(dtype: torch.dtype) -> None:
    original = _values(dtype)
    before = original.clone()
    probed = _perturbed(original, 12345)
    assert torch.equal(original.view(torch.uint8), before.view(torch.uint8)), "the input was modified"
    assert probed.shape == original.shape
    assert probed.dtype == original.dtype
    changed = (probed.reshape(-1).view(torch.uint8) != original.reshape(-1).view(torch.uint8)).sum().item()
    assert 0 < changed <= 2 * PROBE_PAIRS * original.element_size()
    # the same values, moved: the multiset of bit patterns is unchanged
    raw = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[original.element_size()]
    assert torch.equal(
        torch.sort(probed.reshape(-1).view(raw)).values, torch.sort(original.reshape(-1).view(raw)).values
    )


def test_the_same_seed_and_size_give_the_same_probe_and_other_seeds_differ() -> None:
    """kictl's reference worker and the implementation's worker must perturb alike: seed and size decide."""
    a = _values(torch.bfloat16)
    b = _values(torch.bfloat16) * 3  # other values, same size: the same positions move
    first, again = _perturbed(a, 99), _perturbed(a.clone(), 99)
    assert torch.equal(first.view(torch.int16), again.view(torch.int16))
    moved_a = first.view(torch.int16) != a.view(torch.int16)
    moved_b = _perturbed(b, 99).view(torch.int16) != b.view(torch.int16)
    assert torch.equal(moved_a, moved_b)
    assert not torch.equal(_perturbed(a, 100).view(torch.int16), first.view(torch.int16))


def test_no_seed_or_no_room_leaves_the_tensor_as_it_is() -> None:
    values = _values(torch.float32)
    assert _perturbed(values, 0) is values
    single = torch.ones(1)
    assert _perturbed(single, 5) is single
    assert torch.equal(_perturbed(torch.zeros(0), 5), torch.zeros(0))


def test_a_probe_of_a_rolled_noncontiguous_view_is_a_fresh_contiguous_tensor() -> None:
    base = _values(torch.float32, (128, 64))
    view = base.t()  # not contiguous
    probed = _perturbed(view, 3)
    assert probed.shape == view.shape
    assert probed.is_contiguous()
    assert (probed != view).sum().item() > 0
    assert torch.equal(base, _values(torch.float32, (128, 64)))


def test_a_probe_keeps_a_blocks_aggregates_so_a_fingerprint_cache_matches_it() -> None:
    """The cheat class: a cache keyed on a row's sum and a few sampled values.  A probe must look like the last
    call to such a key (so the cache answers it, stale), on nearly every seed, not one probe in five."""
    values = _values(torch.float32).double()
    rows = values.sum(dim=1)
    sampled = values.reshape(-1)[:: values.numel() // 8]
    kept = 0
    for seed in range(1, 201):
        probed = _perturbed(values, seed)
        changed = not torch.equal(probed, values)
        same_key = torch.equal(probed.sum(dim=1), rows) and torch.equal(
            probed.reshape(-1)[:: values.numel() // 8], sampled
        )
        kept += changed and same_key
    assert kept >= 195, kept


def test_a_probe_moves_each_value_to_a_neighbours_place() -> None:
    original = torch.arange(64 * 4096, dtype=torch.int64).reshape(64, 4096)
    moved = (_perturbed(original, 4242) - original).reshape(-1)
    assert set(moved.unique().tolist()) == {-1, 0, 1}
    assert int((moved != 0).sum()) == 2 * PROBE_PAIRS


@pytest.mark.parametrize(
    "dtype", [torch.float8_e4m3fn, torch.float8_e5m2, torch.bfloat16, torch.float32, torch.int32, torch.bool]
)
def test_a_roll_moves_the_bits_of_any_type_without_a_roll_kernel_for_it(
    dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parent rolls a GPU run's timed inputs on the device, where torch has no ``roll`` for the float8 types
    (``"roll_cuda" not implemented for 'Float8_e4m3fn'``: every FP8 MoE run failed at staging on the H100). A
    roll that refuses every floating type, as CUDA's refuses float8, stands in for that device here."""
    original = _values(dtype, (33, 17))
    expected = original.reshape(-1).view(torch.uint8).reshape(-1, original.element_size())
    plain_roll = torch.Tensor.roll

    def integer_roll_only(self: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
        if self.dtype.is_floating_point:
            raise NotImplementedError(f'"roll_cuda" not implemented for {self.dtype}')
        return plain_roll(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(torch.Tensor, "roll", integer_roll_only)
    for position in (0, 1, 3):
        rolled = _rolled(original, 7, position)
        assert rolled.dtype == original.dtype
        assert rolled.shape == original.shape
        shift = input_shift(7, position) % original.numel()
        moved = rolled.reshape(-1).view(torch.uint8).reshape(-1, original.element_size())
        assert torch.equal(moved, expected.roll(shift, dims=0)), position

"""The comparator: tolerance per element, NaN/Inf rules, shapes, dtypes, worst round."""

from __future__ import annotations

import math

import pytest
import torch

from kictl.bench.judge import correctness
from kictl.bench.judge.correctness import Tolerance, compare_output, compare_round, outputs_identical, worst_round

TOL = Tolerance(atol=1e-2, rtol=1e-2, required_matched_ratio=1.0)


def _compare(got: torch.Tensor, want: torch.Tensor, tolerance: Tolerance = TOL) -> correctness.OutputComparison:
    return compare_output(
        "out", got, want, shape=tuple(want.shape), dtype=str(want.dtype).removeprefix("torch."), tolerance=tolerance
    )


def test_within_tolerance_passes_with_errors_reported() -> None:
    want = torch.tensor([1.0, -2.0, 100.0, 0.0])
    got = want + torch.tensor([0.005, -0.01, 0.9, 0.01])
    found = _compare(got, want)
    assert found.status == "passed"
    assert found.matched_ratio == 1.0
    assert found.maximum_absolute_error == pytest.approx(0.9, rel=1e-5)  # float32 inputs
    # relative error divides by max(|y|, atol): 0.01 / 0.01 for the zero reference
    assert found.maximum_relative_error == pytest.approx(1.0, rel=1e-5)


def test_one_element_outside_fails_and_counts() -> None:
    want = torch.zeros(1000)
    got = want.clone()
    got[17] = 0.5
    found = _compare(got, want)
    assert found.status == "incorrect_numerical"
    assert found.matched_ratio == pytest.approx(0.999)
    assert found.detail == "1 of 1000 elements outside tolerance (matched ratio 0.999)"
    relaxed = _compare(got, want, Tolerance(atol=1e-2, rtol=1e-2, required_matched_ratio=0.99))
    assert relaxed.status == "passed"


def test_nan_and_infinity_rules() -> None:
    inf, nan = math.inf, math.nan
    want = torch.tensor([-inf, inf, nan, 1.0, 1.0, 1.0, -inf])
    got = torch.tensor([-inf, inf, nan, nan, inf, 1.0, 0.0])
    found = _compare(got, want)
    # matched: -inf/-inf, inf/inf, nan/nan, 1/1; unmatched: nan for 1, inf for 1, 0 for -inf
    assert found.matched_ratio == pytest.approx(4 / 7)
    assert found.status == "incorrect_numerical"
    assert found.maximum_absolute_error == 0.0  # errors only over pairs that are both finite
    assert all(math.isfinite(v) for v in (found.maximum_absolute_error, found.maximum_relative_error))


def test_minus_infinity_lse_where_the_reference_has_it_is_fine() -> None:
    want = torch.tensor([[-math.inf, 3.5]])
    got = torch.tensor([[-math.inf, 3.501]])
    assert _compare(got, want).status == "passed"


def test_shape_and_dtype_are_checked_first() -> None:
    want = torch.zeros(4, 8, dtype=torch.bfloat16)
    shape = compare_output(
        "o", torch.zeros(4, 7, dtype=torch.bfloat16), want, shape=(4, 8), dtype="bfloat16", tolerance=TOL
    )
    assert (shape.status, shape.detail) == ("incorrect_shape", "shape [4, 7], expected [4, 8]")
    dtype = compare_output("o", torch.zeros(4, 8), want, shape=(4, 8), dtype="bfloat16", tolerance=TOL)
    assert (dtype.status, dtype.detail) == ("incorrect_dtype", "dtype float32, expected bfloat16")


def test_chunks_cover_every_element(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(correctness, "_CHUNK", 7)
    want = torch.arange(100, dtype=torch.float32)
    got = want.clone()
    got[99] += 5
    found = _compare(got, want)
    assert found.matched_ratio == pytest.approx(0.99)
    assert found.maximum_absolute_error == 5.0


def test_worst_round_prefers_failures_then_lowest_ratio() -> None:
    want = torch.zeros(10)
    good = compare_round(1, ["o"], [want], [want], shapes=[(10,)], dtypes=["float32"], tolerance=TOL)
    slightly = want.clone()
    slightly[0] = 0.009
    better = compare_round(2, ["o"], [slightly], [want], shapes=[(10,)], dtypes=["float32"], tolerance=TOL)
    bad_values = want.clone()
    bad_values[:3] = 1
    bad = compare_round(3, ["o"], [bad_values], [want], shapes=[(10,)], dtypes=["float32"], tolerance=TOL)
    assert worst_round([good, better]).offset == 2
    assert worst_round([good, bad, better]).offset == 3
    assert bad.status == "incorrect_numerical"
    assert bad.matched_ratio == pytest.approx(0.7)


def test_outputs_identical_is_bitwise() -> None:
    a = torch.tensor([1.0, math.nan])
    assert outputs_identical([a], [a.clone()])
    assert not outputs_identical([a], [torch.tensor([1.0, 2.0])])
    assert not outputs_identical([a], [a.to(torch.float64)])
    assert not outputs_identical([a], [a, a])


def test_the_fast_paths_give_the_element_wise_answer() -> None:
    """Equal outputs skip the element-wise pass, and large outputs go in chunks: the answer is the same."""
    torch.manual_seed(7)
    n = 3 * correctness.chunk_elements() + 123  # several chunks and a partial one
    want = torch.randn(n).to(torch.bfloat16)
    want[5], want[6], want[7] = float("inf"), float("-inf"), 0.0
    near = want.float() + 2e-3 * torch.randn(n)
    near[5], near[6] = float("inf"), float("-inf")
    tolerance = correctness.Tolerance(atol=1e-2, rtol=1e-2)
    got = near.to(torch.bfloat16)
    equal = correctness.compare_output("o", want.clone(), want, shape=(n,), dtype="bfloat16", tolerance=tolerance)
    assert (equal.status, equal.maximum_absolute_error, equal.maximum_relative_error, equal.matched_ratio) == (
        "passed",
        0.0,
        0.0,
        1.0,
    )
    chunked = correctness.compare_output("o", got, want, shape=(n,), dtype="bfloat16", tolerance=tolerance)
    old_chunk = correctness._CHUNK
    try:
        correctness._CHUNK = 1 << 30  # one chunk: the element-wise rule over the whole output at once
        whole = correctness.compare_output("o", got, want, shape=(n,), dtype="bfloat16", tolerance=tolerance)
    finally:
        correctness._CHUNK = old_chunk
    assert chunked == whole
    assert whole.maximum_absolute_error is not None
    assert whole.maximum_absolute_error > 0
    # one element off by more than the tolerance: counted the same in chunks and whole
    got[n - 1] = 100.0
    worse = correctness.compare_output("o", got, want, shape=(n,), dtype="bfloat16", tolerance=tolerance)
    assert worse.status == "incorrect_numerical"
    assert worse.matched_ratio == pytest.approx((n - 1) / n)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64])
@pytest.mark.parametrize("atol", [1e-2, 0.0])
def test_the_finite_fast_path_agrees_with_the_whole_rule(dtype: torch.dtype, atol: float) -> None:
    """Chunks with and without NaNs and infinities, on either side, at chunk edges: the same counts and errors
    as the element-wise rule applied to the whole output at once, to the last bit."""
    generator = torch.Generator().manual_seed(11)
    chunk = correctness.chunk_elements()
    n = 5 * chunk + 77
    want = (torch.randn(n, generator=generator, dtype=torch.float64) * 3).to(dtype)
    got = (want.to(torch.float64) + 0.02 * torch.randn(n, generator=generator, dtype=torch.float64)).to(dtype)
    specials = [math.nan, math.inf, -math.inf]
    for k, where in enumerate([3, chunk - 1, chunk, 2 * chunk + 5, 4 * chunk + 70]):
        if k % 2:
            want[where] = specials[k % 3]
        else:
            got[where] = specials[k % 3]
    got[2 * chunk + 9] = want[2 * chunk + 9] = math.inf  # an infinity the output matches
    if dtype == torch.float64:
        got[3 * chunk + 1], want[3 * chunk + 1] = 1e308, -1e308  # finite values whose difference overflows
    tolerance = Tolerance(atol=atol, rtol=1e-2, required_matched_ratio=0.5)
    found = compare_output("o", got, want, shape=(n,), dtype=str(dtype).removeprefix("torch."), tolerance=tolerance)
    floor = atol if atol > 0 else 1e-12
    matched, max_abs, max_rel = correctness._general_chunk(
        got.to(torch.float64), want.to(torch.float64), tolerance, floor
    )
    assert found.matched_ratio == matched / n
    assert (found.maximum_absolute_error, found.maximum_relative_error) == (max_abs, max_rel)
    assert 0.5 < found.matched_ratio < 1.0  # some elements outside the tolerance, and the specials

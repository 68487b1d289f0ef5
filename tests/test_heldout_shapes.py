"""Legal axis values (``kictl.families.legal``) and the held-out draw (``kictl.rerun.heldout``): fast, no bench.

The draw must be legal, new (none of the submitted shapes), secret (a
function of the secret: another secret, other shapes) and re-drawable by
whoever holds the secret; a check that does not hold what it claims is refused.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kictl.errors import RecordError
from kictl.families.legal import legal_axes
from kictl.records import DefinitionSpec, StoredRecord, new_record
from kictl.rerun.heldout import HeldOut, NoLegalValues, draw_shapes, verify_draw
from kictl.standing.heldout import FAILS, GENERALIZES

REFERENCE = "def run(q, kv_indptr, kv_indices):\n    return q\n"


def _definition(constraints: list[str], family: str = "gqa-paged-attention") -> StoredRecord:
    spec: dict[str, Any] = {
        "name": "decode_tiny",
        "family": family,
        "axes": {
            "batch_size": {"type": "var"},
            "len_indptr": {"type": "var"},
            "num_pages": {"type": "var"},
            "num_kv_indices": {"type": "var"},
            "page_size": {"type": "const", "value": 1},
            "num_qo_heads": {"type": "const", "value": 4},
            "num_kv_heads": {"type": "const", "value": 1},
            "head_dim": {"type": "const", "value": 8},
        },
        "inputs": {
            "q": {"shape": ["batch_size", "num_qo_heads", "head_dim"], "dtype": "float32"},
            "kv_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
            "kv_indices": {"shape": ["num_kv_indices"], "dtype": "int32"},
        },
        "outputs": {"out": {"shape": ["batch_size", "num_qo_heads", "head_dim"], "dtype": "float32"}},
        "reference": REFERENCE,
        "constraints": constraints,
    }
    return new_record(DefinitionSpec.model_validate_json(json.dumps(spec)), name="decode_tiny")


LEGAL = [
    "1 <= batch_size <= 64",
    "len_indptr == batch_size + 1",
    "1 <= num_pages <= 512",
    "num_kv_indices % 2 == 0",
    "2 <= num_kv_indices <= 256",
    "num_kv_indices <= num_pages",
    "num_kv_indices == kv_indptr[-1].item()",  # over a tensor: the family's business, ignored here
]
SUBMITTED = [
    {"batch_size": 1, "len_indptr": 2, "num_pages": 100, "num_kv_indices": 64},
    {"batch_size": 16, "len_indptr": 17, "num_pages": 512, "num_kv_indices": 256},
]


def test_constraints_state_ranges_multiples_choices_and_derived_axes() -> None:
    definition = _definition([*LEGAL, "head_dim in (8, 16)", "batch_size in (1, 2, 4, 8, 16, 32)"])
    spec = definition.model.spec
    assert isinstance(spec, DefinitionSpec)
    legal = legal_axes(spec)
    assert legal.domains["batch_size"].values() == [1, 2, 4, 8, 16, 32]
    assert legal.domains["num_kv_indices"].values()[:3] == [2, 4, 6]
    assert legal.domains["num_kv_indices"].values()[-1] == 256
    assert legal.domains["num_pages"].values(cap=5) == [1, 2, 3, 4, 5]
    assert "len_indptr" in legal.derived
    assert legal.complete({"batch_size": 3, "num_pages": 9, "num_kv_indices": 4})["len_indptr"] == 4
    assert not legal.admits({"batch_size": 3, "len_indptr": 4, "num_pages": 9, "num_kv_indices": 10})  # > num_pages
    assert "head_dim" not in legal.domains  # a constant is no axis to draw


def test_a_draw_is_legal_new_and_a_function_of_the_secret() -> None:
    definition = _definition(LEGAL)
    first = draw_shapes(definition, SUBMITTED, "a" * 32)
    assert first == draw_shapes(definition, SUBMITTED, "a" * 32)
    assert first != draw_shapes(definition, SUBMITTED, "b" * 32)
    assert len(first) == 3
    for shape in first:
        assert shape["len_indptr"] == shape["batch_size"] + 1
        assert shape["num_kv_indices"] % 2 == 0
        assert shape["batch_size"] <= shape["num_kv_indices"] <= shape["num_pages"] <= 512
        assert {k: shape[k] for k in SUBMITTED[0]} not in SUBMITTED
        assert shape["batch_size"] not in (1, 16)  # each axis prefers a value no submitted shape has
    capped = draw_shapes(definition, SUBMITTED, "a" * 32, cap=8)
    assert all(shape[axis] <= 8 for shape in capped for axis in ("batch_size", "num_pages", "num_kv_indices"))


@settings(max_examples=25, deadline=None)
@given(secret=st.text(alphabet="0123456789abcdef", min_size=32, max_size=32), cap=st.sampled_from([None, 4, 16]))
def test_every_draw_is_legal_and_never_a_submitted_shape(secret: str, cap: int | None) -> None:
    definition = _definition(LEGAL)
    spec = definition.model.spec
    assert isinstance(spec, DefinitionSpec)
    legal = legal_axes(spec)
    for shape in draw_shapes(definition, SUBMITTED, secret, cap=cap):
        assert legal.admits(shape)
        assert {k: shape[k] for k in SUBMITTED[0]} not in SUBMITTED


def test_a_definition_without_legal_values_says_so() -> None:
    with pytest.raises(NoLegalValues, match="states no legal values for axis num_pages"):
        draw_shapes(
            _definition(["1 <= batch_size <= 64", "len_indptr == batch_size + 1", "num_kv_indices <= 8"]), [], "a" * 32
        )
    # len_indptr == batch_size + 1 is a relation of the family (kictl.families.attention): derived, not drawn
    with pytest.raises(NoLegalValues, match="batch_size, num_pages, num_kv_indices"):
        draw_shapes(_definition([]), [], "a" * 32)
    only = [{"batch_size": 1, "len_indptr": 2, "num_pages": 1, "num_kv_indices": 1}]
    with pytest.raises(NoLegalValues, match="no legal shape outside the submitted workloads"):
        draw_shapes(
            _definition(["batch_size == 1", "len_indptr == batch_size + 1", "num_pages == 1", "num_kv_indices == 1"]),
            only,
            "a" * 32,
        )


def test_the_signer_redraws_and_refuses_a_check_that_does_not_hold() -> None:
    definition = _definition(LEGAL)
    secret = "c" * 32
    shapes = draw_shapes(definition, SUBMITTED, secret, cap=16)
    honest = HeldOut(verdict=GENERALIZES, shapes=tuple(shapes), secret=secret, cap=16)
    verify_draw(definition, SUBMITTED, honest)
    failing = HeldOut(
        verdict=FAILS,
        shapes=tuple(shapes),
        failed=({"axes": shapes[0], "status": "runtime_error"},),
        secret=secret,
        cap=16,
    )
    verify_draw(definition, SUBMITTED, failing)
    chosen = HeldOut(verdict=GENERALIZES, shapes=tuple(SUBMITTED[:1]), secret=secret, cap=16)  # shapes it picked itself
    with pytest.raises(RecordError, match="not the ones its secret draws"):
        verify_draw(definition, SUBMITTED, chosen)
    hidden = HeldOut(verdict=GENERALIZES, shapes=tuple(shapes), failed=failing.failed, secret=secret, cap=16)
    with pytest.raises(RecordError, match="does not match its failed shapes"):
        verify_draw(definition, SUBMITTED, hidden)
    other = HeldOut(
        verdict=FAILS, shapes=tuple(shapes), failed=({"axes": SUBMITTED[0], "status": "x"},), secret=secret, cap=16
    )
    with pytest.raises(RecordError, match="not drawn"):
        verify_draw(definition, SUBMITTED, other)
    with pytest.raises(RecordError, match="discloses no secret"):
        verify_draw(definition, SUBMITTED, HeldOut(verdict=GENERALIZES, shapes=tuple(shapes)))

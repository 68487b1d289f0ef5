"""Held-out shapes for the catalogue's published definitions: the ranges kictl states by digest (issue 42).

The catalogue's Definition records state no ranges (they are FlashInfer Trace's, and published records are never
modified), so a held-out rerun could draw no shape for them.  ``kictl/importers/catalogue_ranges.json`` states the
ranges their catalogue workloads span, joined by digest; these tests hold the file to what the catalogue gives,
show that the records are unchanged, that a draw (and the signer's redraw) now finds shapes where the record alone
gives none, that an edited copy gets nothing, and, with real sandboxed workers, that a held-out rerun of a catalogue
definition judges the drawn shapes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kictl.bench.judge.implementation import load_implementation
from kictl.errors import RecordError
from kictl.families.legal import legal_axes
from kictl.importers.catalogue_ranges import RANGES_FILE, render_ranges, stated_ranges
from kictl.records import DefinitionSpec, StoredRecord, new_record, record_from_value
from kictl.rerun.heldout import (
    CPU_CAP,
    HeldOut,
    NoLegalValues,
    check_held_out,
    draw_shapes,
    require_held_out,
    with_stated_ranges,
)
from kictl.rerun.job import ProtocolSettings
from kictl.standing.heldout import GENERALIZES
from tests.conftest import REPO_ROOT

RECORDS = REPO_ROOT / "registry" / "records"
SAMPLING = (
    "sha256:672ca12f3d42d55daa55026fec4d57794e23b35e3b74e4d6404a6e2b3d30e787"  # top_p_sampling_from_probs_v128256
)
RMSNORM = "fused_add_rmsnorm_h2048"
CPU = ProtocolSettings(
    device="cpu", timer="perf_counter_ns", statistic="median", family="kictl-cpu", harness="kictl",
    warmup=None, iterations=None, trials=None, rounds=2, cuda_graph=False, time_setup=False,
    atol=None, rtol=None, matched_ratio=None,
)  # fmt: skip


def _record(kind: str, digest: str) -> StoredRecord:
    hexdigest = digest.removeprefix("sha256:")
    record = record_from_value(json.loads((RECORDS / kind / hexdigest[:2] / f"{hexdigest}.json").read_bytes()))
    assert record.digest == digest
    return record


def _workloads(definition: StoredRecord) -> list[StoredRecord]:
    return sorted(
        (
            record_from_value(value)
            for value in (json.loads(path.read_bytes()) for path in (RECORDS / "Workload").glob("*/*.json"))
            if value["spec"]["definitionDigest"] == definition.digest
        ),
        key=lambda record: record.digest,
    )


def _variable(spec: DefinitionSpec) -> list[str]:
    return [name for name, axis in spec.axes.items() if axis.type == "var"]


def test_the_shipped_statement_is_what_the_catalogue_gives_and_no_record_changes() -> None:
    """The file is ``range_constraints`` over the catalogue's own folders, byte for byte; each entry names a
    published Definition record, which states none of it."""
    assert RANGES_FILE.read_bytes() == render_ranges(REPO_ROOT), (
        "kictl/importers/catalogue_ranges.json is stale: write_ranges(Path('.')) makes it again"
    )
    document = json.loads(RANGES_FILE.read_bytes())
    catalogue = json.loads((REPO_ROOT / "definitions" / "catalogue.json").read_bytes())
    imported = {name for name, entry in catalogue["definitions"].items() if entry["status"] == "imported"}
    assert {entry["name"] for entry in document["definitions"].values()} == imported
    assert document["commit"] == catalogue["commit"]
    for digest, entry in document["definitions"].items():
        record = _record("Definition", digest)
        assert record.name == entry["name"]
        own = record.raw["spec"].get("constraints", [])
        assert not set(entry["constraints"]) & set(own)
        assert stated_ranges(digest) == tuple(entry["constraints"])


def test_a_catalogue_definition_draws_held_out_shapes_by_its_digest_alone() -> None:
    """The record alone states no range (no shape could be drawn); with kictl's statement the draw finds legal,
    new shapes, and the signer requires and accepts the check.  An edited copy (another digest) gets nothing."""
    definition = _record("Definition", SAMPLING)
    spec = definition.model.spec
    assert isinstance(spec, DefinitionSpec)
    assert legal_axes(spec).unstated(_variable(spec)) == ["batch_size"]  # what the published record says
    submitted = [dict(record.raw["spec"]["axes"]) for record in _workloads(definition)]
    assert submitted
    secret = "5e" * 16
    shapes = draw_shapes(definition, submitted, secret, cap=CPU_CAP)
    assert len(shapes) == 3
    legal = legal_axes(with_stated_ranges(definition))
    for shape in shapes:
        assert legal.admits(shape)
        assert {axis: shape[axis] for axis in _variable(spec)} not in submitted
        assert 1 <= shape["batch_size"] <= CPU_CAP
    assert definition.model.spec == spec  # the record is what it was
    with pytest.raises(RecordError, match="holds no held-out result, and definition top_p_sampling_from_probs_v128256"):
        require_held_out(definition, submitted, None, secret=secret, cap=CPU_CAP)
    honest = HeldOut(verdict=GENERALIZES, shapes=tuple(shapes), secret=secret, cap=CPU_CAP)
    require_held_out(definition, submitted, honest, secret=secret, cap=CPU_CAP)
    edited = json.loads(json.dumps(definition.raw["spec"]))
    edited["description"] = "the same definition, edited"
    copy = new_record(DefinitionSpec.model_validate_json(json.dumps(edited)), name=definition.name)
    assert copy.digest != definition.digest
    with pytest.raises(NoLegalValues, match="states no legal values for axis batch_size"):
        draw_shapes(copy, submitted, secret, cap=CPU_CAP)


@pytest.mark.heavy
def test_every_catalogue_definition_draws_or_says_why_on_the_cpu() -> None:
    """Every stated definition draws on the CPU (no axis above 64) but those whose catalogue workloads start above
    64: the reason says so, and they draw on a GPU (no cap)."""
    document = json.loads(RANGES_FILE.read_bytes())
    by_definition: dict[str, list[dict[str, int]]] = {}
    for path in (RECORDS / "Workload").glob("*/*.json"):
        value = json.loads(path.read_bytes())
        if value["spec"]["definitionDigest"] in document["definitions"]:
            by_definition.setdefault(value["spec"]["definitionDigest"], []).append(value["spec"]["axes"])
    capped: list[str] = []
    for digest in document["definitions"]:
        definition = _record("Definition", digest)
        submitted = by_definition.get(digest, [])
        try:
            draw_shapes(definition, submitted, "ab" * 16, cap=CPU_CAP)
        except NoLegalValues as exc:
            capped.append(exc.message)
            assert draw_shapes(definition, submitted, "ab" * 16, cap=None), definition.name
    assert all(f"up to {CPU_CAP}" in message for message in capped), capped
    assert len(capped) < len(document["definitions"]) // 10


@pytest.mark.heavy
def test_a_held_out_rerun_of_a_catalogue_definition_judges_drawn_shapes(tmp_path: Path) -> None:
    """The rerun's own held-out check (sandboxed CPU workers) on a catalogue definition: shapes drawn, judged."""
    document = json.loads(RANGES_FILE.read_bytes())
    (digest,) = [digest for digest, entry in document["definitions"].items() if entry["name"] == RMSNORM]
    definition = _record("Definition", digest)
    spec = definition.model.spec
    assert isinstance(spec, DefinitionSpec)
    workloads = _workloads(definition)
    source = tmp_path / "reference_copy.py"
    source.write_text(spec.reference)
    implementation = load_implementation(str(source), definition, None).record
    submitted = [dict(record.raw["spec"]["axes"]) for record in workloads]
    checks = check_held_out(
        definition, [implementation], workloads[0], submitted, CPU, device="cpu", timeout_s=600, cap=8, count=1
    )
    held = checks[implementation.digest]
    assert held.verdict == GENERALIZES, held
    assert len(held.shapes) == 1
    assert held.shapes[0]["batch_size"] <= 8
    assert held.note is not None
    assert held.note.startswith("1 of 1 held-out shape(s) judged")

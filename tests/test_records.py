"""Record models: the six kinds, strictness, exact members, known-answer digests."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from kictl import canon
from kictl.errors import RecordError
from kictl.records import (
    BenchmarkRun,
    BenchmarkRunSpec,
    LatencyNs,
    Timing,
    format_timestamp,
    new_record,
    record_from_bytes,
    record_from_value,
    records_in_document,
)
from tests import factories
from tests.conftest import ASSETS

KAT = ASSETS / "kat"


def test_every_kind_validates() -> None:
    for name, raw in factories.chain().items():
        stored = record_from_value(raw, source=name)
        assert stored.kind == raw["kind"]
        assert stored.digest == canon.record_digest(raw)


def test_known_answer_manifest_digests() -> None:
    """The digests of a run, its protocol and its environment, against hand-written canonical bytes."""
    manifest = json.loads((KAT / "manifest.json").read_text())
    expected = dict(line.split() for line in (KAT / "digests.txt").read_text().splitlines())
    for member in ("run", "protocol", "environment"):
        canonical = (KAT / f"{member}.canonical.json").read_bytes()
        stored = record_from_value(manifest[member], source=member)
        assert canon.canonical_bytes(canon.digest_body(stored.raw)) == canonical
        assert stored.digest == "sha256:" + hashlib.sha256(canonical).hexdigest() == expected[member]


def test_optional_members_stay_absent_from_the_digest() -> None:
    """An imported run has no definitionDigest, a protocol no warmup: the digest covers what is there."""
    manifest = json.loads((KAT / "manifest.json").read_text())
    run = record_from_value(manifest["run"])
    assert "definitionDigest" not in run.raw["spec"]
    assert isinstance(run.model, BenchmarkRun)
    assert run.model.spec.definition_digest is None
    with_null = json.loads(json.dumps(manifest["run"]))
    with_null["spec"]["definitionDigest"] = None
    assert record_from_value(with_null).digest != run.digest  # null is a member; absence is not


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r["spec"].update(bogus=1), r"\$\.spec\.bogus: unknown member"),
        (
            lambda r: r["spec"]["timing"]["latencyNs"].update(median="12"),
            r"\$\.spec\.timing\.latencyNs\.median: Input should be a valid integer",
        ),
        (
            lambda r: r["spec"]["timing"]["latencyNs"].update(median=12.5),
            r"\$\.spec\.timing\.latencyNs\.median: Input should be a valid integer",
        ),
        (lambda r: r["spec"].update(status="fast"), r"\$\.spec\.status: Input should be"),
        (lambda r: r["spec"].update(workloadDigest="sha256:abc"), r"\$\.spec\.workloadDigest: String should match"),
        (
            lambda r: r["spec"].update(observedAt="2026-11-30T07:31:00Z"),
            r"\$\.spec\.observedAt: timestamps are RFC 3339",
        ),
        (lambda r: r["spec"].update(observedAt="2026-02-30T07:31:00.000Z"), r"\$\.spec\.observedAt: not a real date"),
        (lambda r: r["spec"].pop("protocolDigest"), r"\$\.spec\.protocolDigest: missing member"),
        (
            lambda r: r["spec"]["timing"].update(primaryStatistic="min"),
            r"\$\.spec\.timing: the primary statistic 'min' has no value",
        ),
        (lambda r: r["spec"].pop("timing"), r"\$\.spec: a passed run has timing"),
        (lambda r: r.update(kind="Benchmark"), r"\$\.kind: unknown kind 'Benchmark'"),
        (lambda r: r.update(apiVersion="kernelindex.dev/v2"), r"\$\.apiVersion: Input should be"),
        (lambda r: r["metadata"].update(name="has space"), r"\$\.metadata\.name: String should match"),
    ],
)
def test_invalid_runs_name_the_json_path(mutate: Any, message: str) -> None:
    raw = factories.chain()["run"]
    mutate(raw)
    with pytest.raises(RecordError, match=r"^run\.json: " + message):
        record_from_value(raw, source="run.json")


def test_definition_checks() -> None:
    raw = factories.definition()
    raw["spec"]["inputs"]["A"]["shape"] = ["M", "Q"]
    with pytest.raises(RecordError, match="uses axis 'Q'"):
        record_from_value(raw)
    raw = factories.definition()
    raw["metadata"]["name"] = "other"
    with pytest.raises(RecordError, match=r"differs from spec\.name"):
        record_from_value(raw)


def test_implementation_source_hash_is_checked() -> None:
    raw = factories.implementation("sha256:" + "0" * 64)
    raw["spec"]["sources"][0]["content"] += "# changed\n"
    with pytest.raises(RecordError, match=r"sha256 of main\.py is"):
        record_from_value(raw)
    raw = factories.implementation("sha256:" + "0" * 64)
    raw["spec"]["entryPoint"] = "other.py::run"
    with pytest.raises(RecordError, match=r"entry point file 'other\.py'"):
        record_from_value(raw)


def test_record_from_bytes_matches_record_from_value() -> None:
    raw = factories.chain()["run"]
    data = canon.pretty_bytes(raw)
    assert record_from_bytes(data).digest == record_from_value(raw).digest
    with pytest.raises(RecordError, match=r'duplicate key "status"'):
        record_from_bytes(b'{"spec": {"status": "passed", "status": "passed"}}', source="x")


def test_new_record_keeps_exactly_the_members_set() -> None:
    spec = BenchmarkRunSpec(
        status="passed",
        timing=Timing(latency_ns=LatencyNs(median=1000), primary_statistic="median"),
        observed_at="2026-11-30T07:31:00.000Z",
        workload_digest="sha256:" + "1" * 64,
        implementation_digest="sha256:" + "2" * 64,
        protocol_digest="sha256:" + "3" * 64,
        environment_digest="sha256:" + "4" * 64,
    )
    stored = new_record(spec, name="r1", title="A run")
    assert stored.raw["spec"]["timing"] == {"latencyNs": {"median": 1000}, "primaryStatistic": "median"}
    assert "definitionDigest" not in stored.raw["spec"]
    assert stored.raw["apiVersion"] == "kernelindex.dev/v1alpha1"
    assert record_from_value(stored.raw).digest == stored.digest


def test_documents_split_into_records() -> None:
    chain = factories.chain()
    assert len(records_in_document(chain, source="m.json")) == 6
    assert len(records_in_document(list(chain.values()), source="l.json")) == 6
    assert records_in_document(chain["run"], source="r.json") == [("r.json", chain["run"])]
    with pytest.raises(RecordError, match="neither a record"):
        records_in_document({"a": 1}, source="x.json")
    with pytest.raises(RecordError, match="expected a record"):
        records_in_document(3, source="x.json")


def test_format_timestamp() -> None:
    from datetime import UTC, datetime, timedelta, timezone

    moment = datetime(2026, 11, 30, 8, 31, 0, 123456, tzinfo=timezone(timedelta(hours=1)))
    assert format_timestamp(moment) == "2026-11-30T07:31:00.123Z"
    with pytest.raises(ValueError, match="timezone-aware"):
        format_timestamp(datetime(2026, 1, 1))
    assert format_timestamp(datetime(2026, 1, 1, tzinfo=UTC)) == "2026-01-01T00:00:00.000Z"

"""Parsing record files into index rows, fast: one pass over the bytes, the fields the index needs."""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from kictl import canon, derived, layout
from kictl.bench.worker.timing import quantile as quantile  # the one quantile of kept samples (kictl.derived)
from kictl.errors import RecordError
from kictl.families.gpus import find_gpu, normalize_product
from kictl.index._common import _TABLES
from kictl.lookup import Match
from kictl.records import (
    RECORD_ADAPTER,
    BenchmarkProtocol,
    BenchmarkRun,
    Definition,
    ExecutionEnvironment,
    Hardware,
    Implementation,
    Workload,
)


def run_noise(run: BenchmarkRun) -> tuple[float | None, str | None]:
    """Half the width of a run's 10-90 % band and where it came from (docs/leaderboards.md, ties).

    From the samples when the run has at least two, else from ``latencyNs.p10``
    and ``p90``; ``(None, None)`` when it has neither (ranking then falls back
    on the policy's ``tieTolerance``).
    """
    timing = run.spec.timing
    if timing is None:
        return None, None
    if timing.samples is not None and len(timing.samples) >= 2:
        ordered = sorted(timing.samples)
        return (quantile(ordered, 0.9) - quantile(ordered, 0.1)) / 2, "samples"
    latency = timing.latency_ns
    if latency.p10 is not None and latency.p90 is not None and latency.p90 >= latency.p10:
        return (latency.p90 - latency.p10) / 2, "p10p90"
    return None, None


#: Instruction-set names a CPU environment records as its ``architecture`` (``platform.machine()``).
_CPU_ARCHITECTURES = frozenset({"x86_64", "amd64", "i686", "aarch64", "arm64", "ppc64le", "s390x", "riscv64"})


def is_cpu(hardware: Hardware) -> bool:
    """Whether an environment's device is a CPU: no GPU properties, and a CPU's name or instruction set.

    ``kictl bench --device cpu`` records the CPU's model as the product (and as
    ``cpu``) and ``platform.machine()`` as the architecture; a GPU has an SM
    count, a compute capability, or a product of the datasheet table.
    """
    if hardware.sm_count is not None or hardware.compute_capability is not None:
        return False
    if find_gpu(hardware.product) is not None:
        return False
    return (
        hardware.product.strip().lower() == "cpu"
        or (hardware.cpu is not None and hardware.cpu.strip() == hardware.product.strip())
        or (hardware.architecture or "").lower() in _CPU_ARCHITECTURES
    )


def device_label(hardware: Hardware) -> str:
    """The device a run's group and every listing names: the GPU product, or ``CPU: <model>`` for a CPU.

    A CPU keeps its full model name (``CPU: AMD EPYC 7763 64-Core Processor``),
    so it is never shown where a GPU's name goes as if it were one.
    """
    if not is_cpu(hardware):
        return normalize_product(hardware.product)
    model = hardware.product.strip()
    return "CPU" if model.lower() == "cpu" else f"CPU: {model}"


def _row_values(record: Any) -> tuple[Any, ...]:
    """The kind-specific columns of a validated record (``_COLUMNS`` order)."""
    spec = record.spec
    if isinstance(record, Definition):
        reference_sha = hashlib.sha256(spec.reference.encode("utf-8")).hexdigest()
        return (record.metadata.title, spec.family, reference_sha)
    if isinstance(record, Workload):
        return (spec.definition_digest, json.dumps(spec.axes, sort_keys=True))
    if isinstance(record, Implementation):
        entry_file = spec.entry_point.split("::", 1)[0]
        entry_sha = next((source.sha256 for source in spec.sources if source.path == entry_file), None)
        return (spec.definition_digest, spec.project, spec.runtime, spec.availability, spec.revision, entry_sha)
    if isinstance(record, BenchmarkProtocol):
        return (
            spec.comparability.family,
            spec.measurement.primary_statistic,
            spec.harness.name,
            spec.measurement.timer,
        )
    if isinstance(record, ExecutionEnvironment):
        return (device_label(spec.hardware), spec.hardware.product)
    assert isinstance(record, BenchmarkRun)
    timing = spec.timing
    statistic = timing.primary_statistic if timing is not None else None
    # derived from the kept samples, never the stated figure (kictl.derived, docs/leaderboards.md)
    latency = derived.primary_ns(timing) if timing is not None else None
    noise, source = run_noise(record)
    native_reference: int | None = None
    if spec.source_native is not None and spec.source_native.metrics:
        reference_ms = spec.source_native.metrics.get("reference_latency_ms")
        if reference_ms is not None and math.isfinite(reference_ms) and reference_ms > 0:
            native_reference = round(reference_ms * 1e6)
    samples = len(timing.samples) if timing is not None and timing.samples is not None else 0
    return (
        spec.definition_digest,
        spec.workload_digest,
        spec.implementation_digest,
        spec.protocol_digest,
        spec.environment_digest,
        spec.status,
        statistic,
        latency,
        spec.observed_at,
        noise,
        source,
        native_reference,
        samples,
    )


def _is_record_name(name: str) -> bool:
    """``<64 hex>.json``."""
    return name.endswith(".json") and layout.is_hex64(name[:-5])


def _shard_of(path: str) -> str | None:
    """``Kind/xx`` for ``registry/records/Kind/xx/<hex>.json``, ``None`` for anything else."""
    named = layout.parse_record_path(path)
    if named is None:
        return None
    kind, digest = named
    return f"{kind}/{layout.record_shard(kind, digest[len(layout.DIGEST_PREFIX) :])[-2:]}"


class _SqlCatalogue:
    """Present records of some kinds in the query index, for ``kictl.lookup.resolve``.

    ``where`` (with its ``args``) narrows every table, e.g. to the workloads of
    one definition.  Names of runs are left out of "closest known" hints when
    other kinds are sought too: they are many and nobody types them.
    """

    def __init__(
        self, conn: sqlite3.Connection, kinds: Sequence[str], where: str = "", args: tuple[Any, ...] = ()
    ) -> None:
        self.conn = conn
        self.kinds = kinds
        self.scope = f" AND {where}" if where else ""
        self.args = args

    def _select(self, condition: str, values: tuple[Any, ...], kinds: Sequence[str] | None = None) -> list[Match]:
        found: list[Match] = []
        for kind in kinds or self.kinds:
            rows = self.conn.execute(
                f"SELECT digest, name FROM {_TABLES[kind]} WHERE present = 1 AND {condition}{self.scope} "
                "ORDER BY digest",
                (*values, *self.args),
            )
            found.extend(Match(str(digest), str(name), kind) for digest, name in rows)
        return found

    def by_digest_prefix(self, hex_prefix: str) -> list[Match]:
        low = canon.DIGEST_PREFIX + hex_prefix
        return self._select("digest >= ? AND digest < ?", (low, low + "g"))

    def by_name(self, name: str) -> list[Match]:
        return self._select("name = ?", (name,))

    def by_name_prefix(self, prefix: str) -> list[Match]:
        return self._select("name >= ? AND name < ?", (prefix, prefix + "\U0010ffff"))

    def names(self) -> list[str]:
        kinds = [k for k in self.kinds if k != "BenchmarkRun"] if len(self.kinds) > 1 else self.kinds
        return [match.name for match in self._select("1 = 1", (), kinds)]


@dataclass(frozen=True, slots=True)
class _Parsed:
    path: str
    shard: str
    kind: str
    digest: str
    name: str | None  # None for a problem
    values: tuple[Any, ...]
    problem: str | None


def parse_file(path: str, data: bytes, shard: str | None = None) -> _Parsed:
    """The index row of one record file (or the problem that keeps it out of the facts)."""
    shard = shard or _shard_of(path)
    assert shard is not None
    kind = shard.split("/", 1)[0]
    digest = canon.DIGEST_PREFIX + path.rsplit("/", 1)[1][:-5]
    try:
        model = RECORD_ADAPTER.validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = canon.format_path(tuple(part for part in first["loc"] if isinstance(part, str | int)))
        return _Parsed(path, shard, kind, digest, None, (), f"{where}: {first['msg']}")
    except ValueError as exc:  # pragma: no cover - pydantic wraps JSON errors in ValidationError
        return _Parsed(path, shard, kind, digest, None, (), str(exc))
    if model.kind != kind:
        return _Parsed(path, shard, kind, digest, None, (), f"a {model.kind} filed under {kind}/")
    actual = _content_digest(data, path)
    if actual != digest:
        # docs/leaderboards.md: a file edited after it was published is never ranked, cited or shown
        return _Parsed(path, shard, kind, digest, None, (), f"its content hashes to {actual}, not to its file name")
    return _Parsed(path, shard, kind, digest, model.metadata.name, _row_values(model), None)


def _content_digest(data: bytes, path: str) -> str | None:
    """The record digest of a file's content (``None`` when it cannot be computed)."""
    try:
        raw = canon.parse_record_json(data, source=path)
        return canon.record_digest(raw)
    except RecordError:
        try:  # an integer beyond ±(2^53-1) is read as the double it is (records.load_record_file)
            return canon.record_digest(canon.parse_json(data, source=path))
        except RecordError:
            return None

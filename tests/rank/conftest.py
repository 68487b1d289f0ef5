"""Small real registries for the ranking tests: records built with ``new_record``, stored with
``Registry.add`` in a git repository made by ``kictl init``, committed through gitpython.

``World`` makes a GEMM-like definition whose floor is easy to compute by hand
(A [M, 64] and B [64, 64] in float16, C [M, 64]): bytes ``2·(64M + 4096 + 64M)``,
FLOPs ``2·M·64·64``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from kictl.records import (
    BenchmarkProtocolSpec,
    BenchmarkRunSpec,
    Comparability,
    ConstAxis,
    CorrectnessProtocol,
    DefinitionSpec,
    ExecutionEnvironmentSpec,
    Framework,
    Hardware,
    Harness,
    ImplementationSpec,
    LatencyNs,
    Measurement,
    RandomInput,
    RunCorrectness,
    Software,
    SourceFile,
    StoredRecord,
    TensorSpec,
    Timing,
    VarAxis,
    WorkloadSpec,
    format_timestamp,
    new_record,
)
from kictl.scaffold import create_registry
from kictl.store.registry import Registry

REFERENCE = '''"""Reference: C = A @ B.T in float32, rounded to float16."""

import torch


def run(A, B):
    return (A.float() @ B.float().t()).to(torch.float16)
'''

NOW = datetime.now(UTC)


def source(path: str, content: str) -> SourceFile:
    return SourceFile(path=path, sha256=hashlib.sha256(content.encode()).hexdigest(), content=content)


def days_ago(days: float) -> str:
    return format_timestamp(NOW - timedelta(days=days))


class World:
    """A registry under construction: helpers that build, add and commit real records."""

    def __init__(self, root: Path) -> None:
        create_registry(root)
        self.registry = Registry(root)
        self._pending: list[StoredRecord] = []

    # ----------------------------------------------------------------- records

    def definition(self, name: str = "gemm_n64_k64", reference: str = REFERENCE) -> StoredRecord:
        spec = DefinitionSpec(
            name=name,
            family="gemm",
            axes={
                "M": VarAxis(type="var"),
                "N": ConstAxis(type="const", value=64),
                "K": ConstAxis(type="const", value=64),
            },
            inputs={
                "A": TensorSpec(shape=("M", "K"), dtype="float16"),
                "B": TensorSpec(shape=("N", "K"), dtype="float16"),
            },
            outputs={"C": TensorSpec(shape=("M", "N"), dtype="float16")},
            reference=reference,
        )
        return self._keep(new_record(spec, name=name, title=f"GEMM {name}"))

    def workload(self, definition: StoredRecord, name: str, m: int) -> StoredRecord:
        spec = WorkloadSpec(
            definition_digest=definition.digest,
            axes={"M": m},
            inputs={"A": RandomInput(type="random", seed=m), "B": RandomInput(type="random", seed=m + 1)},
        )
        return self._keep(new_record(spec, name=name))

    def implementation(self, definition: StoredRecord, name: str, content: str | None = None) -> StoredRecord:
        text = content if content is not None else f"# {name}\ndef run(A, B):\n    return A @ B.T\n"
        spec = ImplementationSpec(
            name=name,
            definition_digest=definition.digest,
            runtime="python",
            entry_point="kernel.py::run",
            sources=(source("kernel.py", text),),
        )
        return self._keep(new_record(spec, name=name))

    def protocol(self, family: str = "kictl-cuda-events", statistic: str = "median") -> StoredRecord:
        spec = BenchmarkProtocolSpec(
            harness=Harness(name="kictl", version="0.1.0"),
            correctness=CorrectnessProtocol(reference="definition reference", comparator="allclose"),
            measurement=Measurement(timer="cuda_event", primary_statistic=statistic),  # type: ignore[arg-type]
            comparability=Comparability(family=family),
        )
        return self._keep(new_record(spec, name=f"{family}-{statistic}"))

    def environment(self, product: str = "NVIDIA H200") -> StoredRecord:
        spec = ExecutionEnvironmentSpec(
            hardware=Hardware(vendor="NVIDIA", product=product),
            software=Software(framework=Framework(name="pytorch", version="2.13.0")),
        )
        return self._keep(new_record(spec, name=product.replace(" ", "-")))

    def run(
        self,
        workload: StoredRecord,
        implementation: StoredRecord,
        protocol: StoredRecord,
        environment: StoredRecord,
        latency: int | None,
        *,
        status: str = "passed",
        samples: Sequence[int] | None = None,
        p10: int | None = None,
        p90: int | None = None,
        observed: str | None = None,
        statistic: str = "median",
        name: str | None = None,
        reference_ms: float | None = None,
    ) -> StoredRecord:
        timing = None
        if latency is not None:
            values = {statistic: latency}
            if p10 is not None:
                values["p10"] = p10
            if p90 is not None:
                values["p90"] = p90
            timing = Timing(
                latency_ns=LatencyNs(**values),
                samples=tuple(samples) if samples is not None else None,
                primary_statistic=statistic,  # type: ignore[arg-type]
            )
        members: dict[str, object] = {}
        if reference_ms is not None:
            from kictl.records import SourceNative

            members["source_native"] = SourceNative(
                source="flashinfer-bench",
                metrics={"latency_ms": latency / 1e6 if latency else None, "reference_latency_ms": reference_ms},
            )
        spec = BenchmarkRunSpec(
            status=status,  # type: ignore[arg-type]
            timing=timing,
            observed_at=observed or days_ago(1),
            correctness=RunCorrectness(comparator="allclose", maximum_absolute_error=0.001),
            workload_digest=workload.digest,
            implementation_digest=implementation.digest,
            protocol_digest=protocol.digest,
            environment_digest=environment.digest,
            **members,  # type: ignore[arg-type]
        )
        label = name or f"{implementation.name}-{workload.name}-{latency}-{len(self._pending)}"
        return self._keep(new_record(spec, name=label))

    # ----------------------------------------------------------------- storing

    def _keep(self, record: StoredRecord) -> StoredRecord:
        self._pending.append(record)
        return record

    def add(self) -> None:
        """Store every record built since the last add."""
        self.registry.add(self._pending)
        self._pending = []

    def commit(self, message: str, *, when: datetime | None = None) -> str:
        """Add pending records and commit everything under registry/ (author and commit time ``when``)."""
        self.add()
        repo = self.registry.git.repo
        repo.git.add("registry")
        if when is None:
            return str(repo.index.commit(message).hexsha)
        stamp = f"{int(when.timestamp())} +0000"
        return str(repo.index.commit(message, author_date=stamp, commit_date=stamp).hexsha)


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path / "registry-root")


@pytest.fixture
def basic(world: World) -> dict[str, StoredRecord]:
    """One definition, two workloads, three implementations, one protocol, H200 and B200."""
    definition = world.definition()
    parts = {
        "definition": definition,
        "m1": world.workload(definition, "m1", 1),
        "m128": world.workload(definition, "m128", 128),
        "fast": world.implementation(definition, "fast"),
        "slow": world.implementation(definition, "slow"),
        "flashinfer": world.implementation(definition, "flashinfer_wrapper_abc123"),
        "reference": world.implementation(definition, "reference", REFERENCE),
        "protocol": world.protocol(),
        "h200": world.environment("NVIDIA H200"),
        "b200": world.environment("NVIDIA B200"),
    }
    return parts

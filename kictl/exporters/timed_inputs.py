"""The inputs kictl made for a workload, rebuilt byte for byte for an export (issue 42, docs/exporting.md).

A workload's inputs that kictl makes rather than reads (structure synthesised from the axes, a family's generated
distributions and caches, the tensors of the definition's ``inputs_entrypoint``) are not in any blob of the
registry.  ``kictl export flashinfer-trace`` writes them as safetensors so that FlashInfer-Bench reads the tensors
the exported run was timed on.  Nothing here re-implements how they are made: the bench's own planner
(``kictl.bench.judge.inputs.plan_inputs``, offset 0: the timed calls' inputs), the run's disclosed
``inputSecret`` (``with_secret_values``, which reseeds a family's generated inputs as the session did) and the
worker side's ``materialize_one`` make them here as they made them there.  The entrypoint runs in kictl's
reference worker, on the CPU, as the bench runs it; it runs twice and must make the same bytes both times, or
what was timed cannot be rebuilt and the workload is refused.

torch is imported only when a tensor must be made, a worker only started when an entrypoint must run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import tempfile
from pathlib import Path
from typing import Any

from kictl import families
from kictl.bench import wire
from kictl.bench.judge import sandbox
from kictl.bench.judge.implementation import reference_load
from kictl.bench.judge.inputs import (
    ENTRYPOINT,
    GENERATED,
    BlobReader,
    entrypoint_call,
    materialize_one,
    plan_inputs,
    resolve_entrypoint,
    with_secret_values,
)
from kictl.bench.judge.runner import ImplementationFailed, WorkerGone, WorkerProcess
from kictl.bench.judge.sandbox import Isolation
from kictl.definitions import signature
from kictl.errors import RecordError
from kictl.records import BenchmarkRunSpec, DefinitionSpec, GeneratedInput, StoredRecord, WorkloadSpec

#: A tensor as safetensors holds it: dtype, shape, little-endian bytes.
Tensor = tuple[str, tuple[int, ...], bytes]
#: How long the entrypoint may take (each call), in seconds, and the worker's start.
ENTRYPOINT_TIMEOUT_S = 300.0


class EntrypointWorker:
    """The definition's ``inputs_entrypoint`` called in kictl's reference worker on the CPU (started at the first
    call, one per definition, stopped by ``close``), as ``kictl bench`` calls it: ``f(seed, <axes>)``."""

    def __init__(self, isolation: Isolation | None = None, timeout_s: float = ENTRYPOINT_TIMEOUT_S) -> None:
        self.isolation = isolation
        self.timeout_s = timeout_s
        self._logs: tempfile.TemporaryDirectory[str] | None = None
        self._workers: dict[str, WorkerProcess] = {}

    def generate(
        self, spec: DefinitionSpec, names: tuple[str, ...], axes: dict[str, int], seed: int
    ) -> dict[str, Tensor]:
        """The entrypoint's tensors ``names`` for ``axes`` and ``seed``.  Raises ``RecordError`` when it fails,
        ``EnvError`` when no worker can start (no bubblewrap, no torch)."""

        assert spec.inputs_entrypoint is not None
        worker = self._worker(spec)
        plan, outputs = entrypoint_call(spec, names, axes, seed)
        load = dataclasses.replace(reference_load(spec), function=spec.inputs_entrypoint)
        try:
            worker.wait_ready()
            worker.request(load, self.timeout_s, frozenset({wire.Loaded.TYPE}))
            answer = worker.request(
                wire.Reference(plan=plan, outputs=outputs, shift=0), self.timeout_s, frozenset({wire.Outputs.TYPE})
            )
        except (ImplementationFailed, WorkerGone, wire.WireError) as exc:
            worker.stop()
            detail = str(getattr(exc, "detail", "") or exc).strip().splitlines()
            raise RecordError(
                f"{spec.name}: its inputs entrypoint {spec.inputs_entrypoint}() failed: "
                f"{detail[-1][:300] if detail else 'no detail'}"
            ) from None
        assert isinstance(answer, wire.Outputs)
        return {
            name: (item.dtype, tuple(item.shape), bytes(item.data))
            for name, item in zip(names, answer.tensors, strict=True)
        }

    def _worker(self, spec: DefinitionSpec) -> WorkerProcess:

        key = spec.reference
        worker = self._workers.get(key)
        if worker is None:
            if self.isolation is None:
                self.isolation = sandbox.resolve(no_sandbox=False)
            if self._logs is None:
                self._logs = tempfile.TemporaryDirectory(prefix="kictl-export-inputs.")
            worker = WorkerProcess(
                f"reference{len(self._workers)}",
                "cpu",
                Path(self._logs.name),
                self.isolation,
                startup_timeout=self.timeout_s,
                cupti=False,
                keep_freed_memory=True,
            )
            self._workers[key] = worker
        if not worker.alive:
            worker.start()
        return worker

    def close(self) -> None:
        """Stop every worker this started."""
        for worker in self._workers.values():
            worker.stop()
        self._workers.clear()
        if self._logs is not None:
            self._logs.cleanup()
            self._logs = None


def _tensor(value: Any) -> Tensor:
    """A tensor as safetensors holds it (torch's dtype names are kictl's and safetensors')."""
    import torch  # late: only an export that writes tensors kictl made pays for torch

    flat = value.detach().to("cpu").contiguous()
    dtype = str(flat.dtype).removeprefix("torch.")
    return dtype, tuple(flat.shape), flat.reshape(-1).view(torch.uint8).numpy().tobytes()


def made_inputs(
    definition: StoredRecord,
    workload: StoredRecord,
    run: StoredRecord | None,
    read_blob: BlobReader | None,
    entrypoint: EntrypointWorker | None,
) -> dict[str, Tensor]:
    """The timed calls' tensors of every input of ``workload`` that kictl made rather than read, for ``run``
    (``None``: a session that disclosed no secret).

    Inputs kictl drew at random (``random``: a fresh draw per input set, on the run's device), scalars and
    blobs present in the registry are not in the result.  Raises ``RecordError`` when an input cannot be rebuilt:
    a blob the source did not ship where no family synthesises it, an entrypoint that fails or is not a function
    of its seed.
    """

    spec = definition.model.spec
    model = workload.model.spec
    run_spec = run.model.spec if run is not None else None
    assert isinstance(spec, DefinitionSpec)
    assert isinstance(model, WorkloadSpec)
    secret = run_spec.input_secret if isinstance(run_spec, BenchmarkRunSpec) else None

    order = signature(spec, source=f"{spec.name} reference").inputs
    plan = plan_inputs(spec, workload, order, read_blob, offset=0)
    entrypoint_names = {source.name for source in plan.sources if source.kind == ENTRYPOINT}
    if entrypoint_names:
        if entrypoint is None:
            raise RecordError(f"workload {workload.name}: its generated inputs need the definition's entrypoint run")
        axes = families.full_axes(spec, model.axes, source=f"workload {workload.name}")

        def generate(names: tuple[str, ...], axes: dict[str, int], seed: int) -> dict[str, Tensor]:
            return entrypoint.generate(spec, names, axes, seed)

        first = resolve_entrypoint(plan, axes, generate)
        again = resolve_entrypoint(plan, axes, generate)
        if [_fingerprint(s.blob) for s in first.sources] != [_fingerprint(s.blob) for s in again.sources]:
            raise RecordError(
                f"workload {workload.name}: {spec.inputs_entrypoint}() made different tensors for the same seed; "
                "the inputs kictl timed cannot be rebuilt"
            )
        plan = first
    if secret is not None:  # the run's session reseeded a family's generated inputs from it
        plan = with_secret_values(plan, secret, f"{workload.digest}:input set 0")
    made: dict[str, Tensor] = {}
    for source in plan.sources:
        generated = isinstance(model.inputs.get(source.name), GeneratedInput) and source.name in entrypoint_names
        if source.kind == "values" or source.kind.startswith(GENERATED) or generated:
            made[source.name] = _tensor(materialize_one(source, "cpu"))
    return made


def _fingerprint(blob: bytes | None) -> str | None:
    return None if blob is None else hashlib.sha256(blob).hexdigest()


__all__ = ["ENTRYPOINT_TIMEOUT_S", "EntrypointWorker", "Tensor", "made_inputs"]

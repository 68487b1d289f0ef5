"""Evaluated trace lines made into BenchmarkRuns (with their environment and the one protocol), and the
import's notes; ``_Reader`` reads a whole dataset folder.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kictl import canon
from kictl.families.gpus import find_gpu, normalize_product
from kictl.importers.flashinfer_bench.documents import _DocumentReader, _Solution
from kictl.importers.flashinfer_bench.model import (
    BARE_DEFINITIONS_SHOWN,
    COMPARABILITY_FAMILY,
    COMPARATOR,
    CORRECTNESS_REFERENCE,
    HARNESS_REPOSITORY,
    METRICS,
    PRIMARY_STATISTIC,
    PROTOCOL_NAME,
    SOURCE,
    STATUSES,
    TIMER,
    Limits,
    MissingBlob,
)
from kictl.importers.flashinfer_bench.values import (
    _build,
    _describe_non_finite,
    _did_you_mean,
    _number,
    _object,
    _path,
    _Skip,
    _string,
)
from kictl.importers.flashinfer_bench.walker import _Line
from kictl.records import (
    StoredRecord,
    format_timestamp,
)


class _Reader(_DocumentReader):
    """Reads one dataset folder; ``dataset`` holds the records and the report."""

    def __init__(self, root: Path, limits: Limits, taken_names: Mapping[str, list[StoredRecord]]) -> None:
        super().__init__(root, limits, taken_names)
        self.aliases: dict[str, str] = {}
        self.naive_timestamps = 0
        self.non_finite_runs = 0
        self.protocol = self._protocol()

    def read(self) -> None:
        for path in self._files("definitions", "*.json"):
            self._guard(path, "Definition", self._definition_file)
        for path in self._files("solutions", "*.json"):
            self._guard(path, "Implementation", self._solution_file)
        workload_lines: list[_Line] = []
        trace_lines: list[_Line] = []
        for path in (*self._files("workloads", "*.jsonl"), *self._files("traces", "*.jsonl")):
            for line in self._lines(path):
                (trace_lines if self._evaluated(line.value) else workload_lines).append(line)
        for line in workload_lines:
            self._guard_line(line, "Workload", self._workload_line)
        for line in trace_lines:
            self._guard_line(line, "BenchmarkRun", self._trace_line)
        self._finish_notes()
        rank = {folder: index for index, folder in enumerate(("definitions", "solutions", "workloads", "traces"))}
        self.dataset.skipped.sort(key=lambda item: (rank.get(item.file.split("/")[0], 4), item.file, item.line or 0))

    def _trace_line(self, line: _Line) -> None:
        """A BenchmarkRun from an evaluated line; its workload and environment are stored with it."""
        definition = self._definition_of(line)
        value = line.value
        evaluation = _object(value.get("evaluation"), "evaluation")
        solution_name = value.get("solution")
        if not isinstance(solution_name, str) or not solution_name:
            raise _Skip("$.solution: an evaluation names no solution")
        solution, alias = self._solution(solution_name, line.definition)
        status_text = _string(evaluation.get("status"), "evaluation", "status")
        if status_text not in STATUSES:
            raise _Skip(f"$.evaluation.status: unknown status {status_text!r} (not a FlashInfer-Bench status)")
        status = STATUSES[status_text]
        details: list[str] = []
        observed_at, zone_given = self._observed_at(evaluation, details)
        environment = self._environment(evaluation)
        correctness = evaluation.get("correctness")
        if correctness is not None:
            correctness = self._correctness(_object(correctness, "evaluation", "correctness"), details)
        performance = evaluation.get("performance")
        metrics = None
        if performance is not None:
            metrics = self._metrics(_object(performance, "evaluation", "performance"), details)
        latency_ms = metrics.get("latency_ms") if metrics is not None else None
        if latency_ms is not None and latency_ms < 0:
            raise _Skip(f"$.evaluation.performance.latency_ms: negative ({latency_ms})")
        if latency_ms is not None and latency_ms * 1_000_000 > canon.MAX_SAFE_INTEGER:
            raise _Skip(
                f"$.evaluation.performance.latency_ms: {latency_ms!r} is out of range "
                f"(latencyNs holds at most {canon.MAX_SAFE_INTEGER} ns, about 104 days)"
            )
        if status == "passed" and latency_ms is None:
            raise _Skip("$.evaluation: PASSED without a finite performance.latency_ms")
        workload = self._trace_workload(definition, line)
        assert workload.record is not None
        spec: dict[str, Any] = {
            "status": status,
            "observedAt": observed_at,
            "definitionDigest": definition.record.digest,
            "workloadDigest": workload.record.digest,
            "implementationDigest": solution.record.digest,
            "protocolDigest": self.protocol.digest,
            "environmentDigest": environment.digest,
        }
        if correctness is not None:
            spec["correctness"] = correctness
        if latency_ms is not None:
            spec["timing"] = {
                "latencyNs": {"mean": round(latency_ms * 1_000_000)},
                "primaryStatistic": PRIMARY_STATISTIC,
            }
        native: dict[str, Any] = {
            "source": SOURCE,
            "benchmark": line.definition,
            "externalId": f"trace/{solution_name}/{workload.record.name}",
        }
        if metrics is not None:
            native["metrics"] = metrics
        spec["sourceNative"] = native
        if details:
            spec["statusDetail"] = "; ".join(details)
        product = environment.raw["spec"]["hardware"]["product"]
        title = f"{solution.record.name} on {workload.record.title or workload.record.name} ({product})"
        run = _build("BenchmarkRun", f"{solution.record.name}/{workload.record.name}", spec, title=title)
        # nothing below can fail: the line's records are stored together or not at all
        self._commit_workload(workload)
        self._add(environment)
        self._add(self.protocol)
        self._add(run)
        if alias is not None:
            self.aliases[solution_name] = alias
        self.naive_timestamps += not zone_given
        self.non_finite_runs += any("is null" in detail for detail in details)

    def _solution(self, name: str, definition: str) -> tuple[_Solution, str | None]:
        """The solution a trace names, and the file's name when the trace used the 2025 alias.

        The 2025 shape's traces call a solution ``<definition>_<label>`` where
        its file names it ``<label>_<definition>``.
        """
        found = self.solutions.get(name)
        alias = None
        if found is None and name.startswith(definition + "_"):
            alias = f"{name[len(definition) + 1 :]}_{definition}"
            found = self.solutions.get(alias)
        if found is None:
            near = _did_you_mean(name, self.solutions)
            raise _Skip(f"$.solution: solution {name} is not in the dataset (or was skipped){near}")
        if found.definition != definition:
            raise _Skip(f"$.solution: solution {found.record.name} implements {found.definition}, not {definition}")
        return found, alias

    def _observed_at(self, evaluation: dict[str, Any], details: list[str]) -> tuple[str, bool]:
        """The run's observedAt and whether the source gave a time zone (else UTC is assumed and said)."""
        text = _string(evaluation.get("timestamp"), "evaluation", "timestamp")
        try:
            moment = datetime.fromisoformat(text)
        except ValueError as exc:
            raise _Skip(f"$.evaluation.timestamp: not an ISO 8601 date and time: {text!r}") from exc
        zone_given = moment.tzinfo is not None
        if not zone_given:
            details.append(f"observedAt: the source's timestamp {text} has no time zone; read as UTC")
            moment = moment.replace(tzinfo=UTC)
        return format_timestamp(moment), zone_given

    def _correctness(self, correctness: dict[str, Any], details: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = {"comparator": COMPARATOR}
        for source_name, member in (
            ("max_absolute_error", "maximumAbsoluteError"),
            ("max_relative_error", "maximumRelativeError"),
        ):
            if source_name not in correctness:
                continue
            raw = correctness[source_name]
            if raw is None:
                out[member] = None
                details.append(f"{member} is null: the source gives no {source_name}")
                continue
            number = _number(raw, "evaluation", "correctness", source_name)
            if not math.isfinite(number):
                out[member] = None
                details.append(f"{member} is null: the source reports {source_name} {_describe_non_finite(number)}")
            elif number < 0:
                raise _Skip(f"$.evaluation.correctness.{source_name}: negative ({number})")
            else:
                out[member] = number
        return out

    def _metrics(self, performance: dict[str, Any], details: list[str]) -> dict[str, float | None]:
        metrics: dict[str, float | None] = {}
        for name in METRICS:
            if name not in performance:
                continue
            raw = performance[name]
            if raw is None:
                metrics[name] = None
                continue
            number = _number(raw, "evaluation", "performance", name)
            if math.isfinite(number):
                metrics[name] = number
            else:
                metrics[name] = None
                details.append(
                    f"sourceNative.metrics.{name} is null: the source reports {_describe_non_finite(number)}"
                )
        return metrics

    @staticmethod
    def _protocol() -> StoredRecord:
        spec = {
            "harness": {"name": SOURCE, "repository": HARNESS_REPOSITORY},
            "correctness": {"reference": CORRECTNESS_REFERENCE, "comparator": COMPARATOR},
            "measurement": {"timer": TIMER, "primaryStatistic": PRIMARY_STATISTIC},
            "comparability": {"family": COMPARABILITY_FAMILY},
        }
        return _build("BenchmarkProtocol", PROTOCOL_NAME, spec, title="FlashInfer-Bench trace evaluation")

    def _environment(self, evaluation: dict[str, Any]) -> StoredRecord:
        environment = _object(evaluation.get("environment"), "evaluation", "environment")
        member = "hardware" if "hardware" in environment else "device"
        device = _string(environment.get(member), "evaluation", "environment", member)
        libs_value = environment.get("libs", {})
        libs = _object(libs_value if libs_value is not None else {}, "evaluation", "environment", "libs")
        versions: dict[str, str] = {}
        for lib, version in libs.items():
            if isinstance(version, bool) or not isinstance(version, str | int | float):
                raise _Skip(f"{_path('evaluation', 'environment', 'libs', lib)}: expected a version string")
            versions[lib] = str(version)
        product = normalize_product(device.replace("_", " "))
        known = find_gpu(product)
        hardware: dict[str, Any] = {"product": product}
        if known is not None:
            hardware["vendor"] = known.vendor
            hardware["architecture"] = known.architecture
        elif device.upper().startswith("NVIDIA"):
            hardware["vendor"] = "NVIDIA"
        software: dict[str, Any] = {}
        if "torch" in versions:
            software["framework"] = {"name": "pytorch", "version": versions["torch"]}
        if "cuda" in versions:
            software["cudaToolkit"] = versions["cuda"]
        others = {lib: version for lib, version in versions.items() if lib not in ("torch", "cuda")}
        if others:
            software["libraries"] = others
        parts = [product.replace(" ", "-")]
        parts += [f"torch-{versions['torch']}"] if "torch" in versions else []
        parts += [f"cuda-{versions['cuda']}"] if "cuda" in versions else []
        name = "_".join(parts).replace(" ", "-")
        return _build("ExecutionEnvironment", name, {"hardware": hardware, "software": software})

    def _finish_notes(self) -> None:
        notes = self.dataset.notes
        self._note_bare_definitions()
        for trace_name, solution_name in sorted(self.aliases.items()):
            notes.append(f"traces name solution {solution_name} as {trace_name} (2025 shape); matched")
        if self.naive_timestamps:
            notes.append(
                f"{self.naive_timestamps} trace timestamp(s) carry no time zone; read as UTC "
                "(each run says so in statusDetail)"
            )
        if self.non_finite_runs:
            notes.append(
                f"{self.non_finite_runs} run(s) hold null where the source gives NaN, Infinity or nothing "
                "(each run says which in statusDetail)"
            )
        if self.unmatched_workloads:
            notes.append(
                f"{self.unmatched_workloads} trace line(s) without a workload uuid match no workload line; "
                "their workloads are named by their axes"
            )
        for definition, uuid in sorted(self.redescribed):
            notes.append(f"workload {uuid} of {definition} is described differently by two lines; both are kept")
        for definition, absent in sorted(self.incomplete_inputs.items()):
            notes.append(f"workloads of {definition} give no source for input(s) {', '.join(sorted(absent))}")
        for what, members in sorted(self.dropped.items()):
            notes.append(f"{what} member(s) the index does not keep: {', '.join(sorted(members))}")
        if self.solution_without_evaluation:
            notes.append(
                f"{self.solution_without_evaluation} line(s) name a solution but carry no evaluation; "
                "imported as workloads only"
            )
        for path_text, uses in self.missing.items():
            workloads = tuple(dict.fromkeys(workload for workload, _ in uses))
            self.dataset.missing_blobs.append(MissingBlob(path=path_text, inputs=len(uses), workloads=workloads))
        if self.missing:
            inputs = sum(blob.inputs for blob in self.dataset.missing_blobs)
            notes.append(
                f"{len(self.missing)} safetensors file(s) named by {inputs} input(s) are not in the dataset; "
                "those inputs are kept with their path and missing: true"
            )

    def _note_bare_definitions(self) -> None:
        """Name the definitions that no workload of the dataset names: nothing can be benched on them yet."""
        named = {record.raw["spec"]["definitionDigest"] for record in self.dataset.by_kind("Workload")}
        bare = sorted(name for name, known in self.definitions.items() if known.record.digest not in named)
        self.dataset.definitions_without_workloads = bare
        if bare:
            shown = ", ".join(bare[:BARE_DEFINITIONS_SHOWN])
            more = len(bare) - BARE_DEFINITIONS_SHOWN
            rest = f" and {more} more (--json lists them all under definitionsWithoutWorkloads)" if more > 0 else ""
            self.dataset.notes.append(
                f"{len(bare)} of {len(self.definitions)} definition(s) arrived with no workload, so nothing can be "
                f"benched on them until workloads are added: {shown}{rest}"
            )

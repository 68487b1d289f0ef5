"""The review's checks of the new runs: physical floors, signatures, imported numbers, leaderboard
moves.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from kictl import derived, families, layout, render
from kictl.errors import KictlError
from kictl.families.gpus import find_gpu
from kictl.layout import (
    ATTESTATIONS_DIR,
    ROOT_FILE,
)
from kictl.policy import Policy
from kictl.records import (
    BenchmarkProtocol,
    BenchmarkRun,
    Definition,
    ExecutionEnvironment,
    Implementation,
    StoredRecord,
    Workload,
)
from kictl.render import latency
from kictl.review._common import RERUN_MARGIN
from kictl.review.model import AttestationVerdict, NotChecked
from kictl.review.report import _count
from kictl.review.revision import claimed_predicate_type, read_paths
from kictl.review.seams import _NO_RANK, _NO_TRUST
from kictl.review.state import _ReviewBase


class _RunChecks(_ReviewBase):
    """The checks of the new runs: physical floors, signatures, imported numbers, and the leaderboards they move."""

    def _measured_on_cpu(self, run: BenchmarkRun) -> bool:
        """Whether the run's protocol measured a CPU (its device, or a CPU timer where the device is not said)."""
        protocol = self.record(run.spec.protocol_digest)
        if protocol is None or not isinstance(protocol.model, BenchmarkProtocol):
            return False
        measurement = protocol.model.spec.measurement
        if measurement.device is not None:
            return measurement.device == "cpu"
        return measurement.timer == "perf_counter_ns"

    def _run_context(self, run: BenchmarkRun) -> tuple[StoredRecord, StoredRecord, StoredRecord] | None:
        """The workload, definition and environment of a run, when head has all three."""
        spec = run.spec
        workload = self.record(spec.workload_digest)
        environment = self.record(spec.environment_digest)
        if workload is None or environment is None or not isinstance(workload.model, Workload):
            return None
        definition = self.record(spec.definition_digest or workload.model.spec.definition_digest)
        if definition is None or not isinstance(definition.model, Definition):
            return None
        if not isinstance(environment.model, ExecutionEnvironment):
            return None
        return workload, definition, environment

    def _floors(self, runs: Sequence[tuple[str, StoredRecord]]) -> None:
        """docs/leaderboards.md: a run faster than its floor is impossible and is rejected in review."""
        passed = [
            (path, record.model)
            for path, record in runs
            if isinstance(record.model, BenchmarkRun)
            and record.model.spec.status == "passed"
            and record.model.spec.timing is not None
        ]
        needed = {digest for _, run in passed for digest in (run.spec.workload_digest, run.spec.environment_digest)}
        self.preload(needed)
        self.preload(
            {
                record.model.spec.definition_digest
                for digest in needed
                if (record := self.record(digest)) is not None and isinstance(record.model, Workload)
            }
        )
        floors: dict[tuple[str, str], families.Floor | None] = {}
        works: dict[tuple[str, str], families.Work] = {}
        failures: dict[tuple[str, str], str] = {}
        unknown_gpus: Counter[str] = Counter()
        for path, run in passed:
            context = self._run_context(run)
            if context is None:
                continue
            workload, definition, environment = context
            assert isinstance(environment.model, ExecutionEnvironment)
            assert isinstance(workload.model, Workload)
            assert isinstance(definition.model, Definition)
            product = environment.model.spec.hardware.product
            gpu = find_gpu(product)
            if gpu is None:
                if self._measured_on_cpu(run):
                    unknown_gpus[product] += 1  # a CPU: no datasheet floor exists, its family ranks CPUs only
                else:
                    self.lint(
                        "unknown-gpu",
                        f"ran on GPU product {product!r}, which has no datasheet figures in kictl: its physical "
                        "floor cannot be checked, so its speed is not accepted (add the product to "
                        "kictl/families/gpus.py in a code PR first)",
                        path,
                    )
                continue
            key = (workload.digest, gpu.product)
            if key not in floors:
                try:
                    work = families.work(definition.model.spec, workload.model.spec, self.read_blob)
                    floors[key] = families.floor(work, gpu)
                    works[key] = work
                except (KictlError, LookupError, KeyError, ValueError, ArithmeticError, TypeError) as exc:
                    floors[key] = None
                    failures[key] = str(getattr(exc, "message", None) or exc) or type(exc).__name__
            floor = floors[key]
            if key in failures:
                self.lint(
                    "no-floor",
                    f"the physical floor of workload {workload.name} on {gpu.product} cannot be computed "
                    f"({failures[key]}); a run whose speed cannot be checked is not accepted",
                    path,
                )
                continue
            timing = run.spec.timing
            assert timing is not None
            primary = derived.primary_ns(timing)  # from the kept samples, never the stated figure
            assert primary is not None
            if floor is not None and primary < floor.floor_ns:
                self.lint(
                    "below-floor",
                    f"{timing.primary_statistic} {latency(primary)} is below the physical floor "
                    f"{latency(floor.floor_ns)} of workload {workload.name} on {gpu.product} "
                    f"({floor.method}); no run can be faster than its floor",
                    path,
                )
            if run.spec.energy is not None:  # energy (issues 31, 41): self-consistency and physics, the check named
                checks = derived.energy_checks(run.spec.energy, works.get(key))
                for name in derived.failed_checks(checks):
                    code = derived.ENERGY_LINT if name in derived.CONSISTENCY_CHECKS else "energy-out-of-bounds"
                    self.lint(code, f"{name}: {checks[name]['detail']}", path)
        if unknown_gpus:
            names = ", ".join(sorted(unknown_gpus))
            self.report.not_checked.append(
                NotChecked("floors", f"{sum(unknown_gpus.values())} run(s) on CPUs (no datasheet floor): {names}")
            )

    def _derived_figures(self, runs: Sequence[tuple[str, StoredRecord]]) -> None:
        """docs/review.md: a stated statistic must be what the run's own kept samples give (``kictl.derived``)."""
        for path, record in runs:
            assert isinstance(record.model, BenchmarkRun)
            timing = record.model.spec.timing
            if timing is None:
                continue
            figures = derived.timing_figures(timing)
            if figures.contradictions:
                said = "; ".join(item.text() for item in figures.contradictions)
                self.lint(
                    derived.TIMING_LINT,
                    f"{said} from its {figures.samples} kept samples: readers use the derived figures",
                    path,
                )

    def _consistency(self, runs: Sequence[tuple[str, StoredRecord]]) -> None:
        """A run's implementation and workload belong to its definition; the workload's axes fit it."""
        for path, record in runs:
            assert isinstance(record.model, BenchmarkRun)
            spec = record.model.spec
            workload = self.record(spec.workload_digest)
            if workload is None or not isinstance(workload.model, Workload):
                continue  # dangling or invalid: linted elsewhere
            definition_digest = workload.model.spec.definition_digest
            if spec.definition_digest is not None and spec.definition_digest != definition_digest:
                self.lint(
                    "inconsistent-run",
                    f"$.spec.definitionDigest is {spec.definition_digest}, but its workload {workload.name} "
                    f"belongs to {definition_digest}",
                    path,
                )
            implementation = self.record(spec.implementation_digest)
            if implementation is not None and isinstance(implementation.model, Implementation):
                own = implementation.model.spec.definition_digest
                if own is not None and own != definition_digest:
                    self.lint(
                        "inconsistent-run",
                        f"its implementation {implementation.name} belongs to definition {own}, "
                        f"not to {definition_digest} of its workload {workload.name}",
                        path,
                    )
            definition = self.record(definition_digest)
            if definition is None or not isinstance(definition.model, Definition):
                continue
            axes = definition.model.spec.axes
            variable = {name for name, axis in axes.items() if axis.type == "var"}
            given = set(workload.model.spec.axes)
            if given != variable:
                missing, extra = sorted(variable - given), sorted(given - variable)
                parts = ([f"lacks {', '.join(missing)}"] if missing else []) + (
                    [f"sets {', '.join(extra)}, not variable axes of the definition"] if extra else []
                )
                self.lint(
                    "inconsistent-run",
                    f"its workload {workload.name}'s axes do not fit definition {definition.name}: {'; '.join(parts)}",
                    path,
                )
            looser = self._looser_than_contract(record.model, definition.model)
            if looser:
                self.lint(
                    "looser-than-contract",
                    f"judged at {', '.join(looser)}: looser than definition {definition.name}'s precision contract",
                    path,
                )

    def _looser_than_contract(self, run: BenchmarkRun, definition: Definition) -> list[str]:
        """What of a passed run's tolerance is looser than its definition's contract (empty: none, or no contract)."""
        contract = definition.spec.tolerance
        protocol = self.record(run.spec.protocol_digest)
        if contract is None or run.spec.status != "passed":
            return []
        if protocol is None or not isinstance(protocol.model, BenchmarkProtocol):
            return []  # a dangling protocol is linted elsewhere
        judged = protocol.model.spec.correctness
        found = []
        if contract.atol is not None and (judged.atol is None or judged.atol > contract.atol):
            found.append(f"atol {judged.atol if judged.atol is not None else 'unstated'} > {contract.atol:g}")
        if contract.rtol is not None and (judged.rtol is None or judged.rtol > contract.rtol):
            found.append(f"rtol {judged.rtol if judged.rtol is not None else 'unstated'} > {contract.rtol:g}")
        least = contract.required_matched_ratio
        ratio = judged.required_matched_ratio
        if least is not None and (ratio is None or ratio < least):
            found.append(f"matched ratio {ratio if ratio is not None else 'unstated'} < {least:g}")
        return found

    def _base_verifier_reruns(self, root: bytes, wanted: set[str]) -> set[str | None]:
        """Runs among ``wanted`` that a valid verifier ``rerun`` attestation already on the base names.

        A verifier's rerun is its own BenchmarkRun, signed by the rerun attestation
        about the original (docs/rerun.md), not by a submission.
        """
        verify = self.checks.verify_attestation
        assert verify is not None
        candidates = []
        for path in self.git.list_files(self.report.base, ATTESTATIONS_DIR):
            named = layout.parse_attestation_path(path)
            if named is not None:
                candidates.append((named[0], path))
        data = read_paths(self.git, self.report.base, [path for _, path in candidates])
        merged = self.git.merged_times(ATTESTATIONS_DIR, self.report.base)
        times = {path: datetime.fromtimestamp(stamp, UTC) for path, stamp in merged.items()}
        found: set[str | None] = set()
        for subject_digest, path in candidates:
            body = data.get(path)
            if body is None or claimed_predicate_type(body) != "rerun":
                continue
            subject = self.record(subject_digest)
            if subject is None:
                continue
            verdict = verify(body, subject, root, times.get(path, self.signing_bound()))
            if verdict.verifier_rerun in wanted:
                found.add(verdict.verifier_rerun)
        return found

    def _signatures(self, runs: Sequence[tuple[str, StoredRecord]]) -> dict[str, list[AttestationVerdict]] | None:
        """Verify every new envelope through the trust seam; lint runs without a valid submission."""
        verify = self.checks.verify_attestation
        if verify is None:
            if runs or self.new_envelopes:
                self.report.not_checked.append(
                    NotChecked("signatures", f"{_NO_TRUST}: submission signatures and key validity were not verified")
                )
            return None
        root = read_paths(self.git, self.report.base, [ROOT_FILE]).get(ROOT_FILE)
        verdicts: dict[str, list[AttestationVerdict]] = {}
        if root is None:
            for path, _ in runs:
                self.lint("unsigned-run", "the base has no trust root, so no signature can be valid", path)
            return verdicts
        signed_at = self.signing_bound()
        for subject_digest, paths in sorted(self.new_envelopes.items()):
            subject = self.record(subject_digest)
            if subject is None:
                continue  # linted as dangling
            for path in paths:
                verdict = verify(self.head_bytes[path], subject, root, signed_at)
                verdicts.setdefault(subject_digest, []).append(verdict)
                if verdict.problem is not None:
                    self.lint("bad-attestation", verdict.problem, path)
        reruns = {verdict.verifier_rerun for judged in verdicts.values() for verdict in judged} - {None}
        unsigned = [record.digest for _, record in runs if record.digest not in reruns]
        if unsigned:
            reruns |= self._base_verifier_reruns(root, set(unsigned))
        for path, record in runs:
            judged = verdicts.get(record.digest, [])
            signed = record.digest in reruns or any(
                verdict.valid and verdict.predicate_type == "submission" and "submitter" in verdict.roles
                for verdict in judged
            )
            if not signed and not any(not verdict.valid for verdict in judged):  # else bad-attestation says why
                self.lint(
                    "unsigned-run",
                    "no valid submission attestation by a submitter key of the trust root "
                    "(sign it with `kictl sign` and add the envelope)",
                    path,
                )
        return verdicts

    def _source_native(
        self, runs: Sequence[tuple[str, StoredRecord]], verdicts: Mapping[str, list[AttestationVerdict]] | None
    ) -> None:
        for path, record in runs:
            assert isinstance(record.model, BenchmarkRun)
            native = record.model.spec.source_native
            if native is None:
                continue
            if verdicts is not None:
                rerun = any(
                    verdict.valid and verdict.predicate_type == "rerun" and "verifier" in verdict.roles
                    for verdict in verdicts.get(record.digest, [])
                )
                qualifier = "no verified rerun attestation by a verifier"
            else:
                claimed = [
                    claimed_predicate_type(self.head_bytes[envelope])
                    for envelope in self.new_envelopes.get(record.digest, [])
                ]
                rerun = "rerun" in claimed
                qualifier = "no rerun attestation (signatures not verified)"
            if not rerun:
                source = native.source + (f" {native.benchmark}" if native.benchmark else "")
                self.hint(
                    "source-native-no-rerun",
                    f"imported from {source} with {qualifier}: its numbers are the source's own; "
                    "a verifier's rerun would make it verified: `kictl rerun RUN --out DIR`, then "
                    "`kictl attest rerun DIR --key VERIFIER_KEY`",
                    path,
                )

    # ----------------------------------------------------------------- leaderboards

    def _leaderboards(self, policy: Policy, new_runs: Sequence[str]) -> None:
        seam = self.checks.leaderboards
        if seam is None:
            if new_runs:
                self.report.not_checked.append(
                    NotChecked("leaderboards", f"{_NO_RANK}: rank changes, new #1 records and stale groups")
                )
            return
        if not new_runs:  # no run added: no group changes (published runs never go; linted if they do)
            self.report.leaderboards = []
            return
        try:
            diff = seam(self.registry, self.report.merge_base, self.report.head, policy, new_runs, self.report.base)
        except KictlError as exc:  # e.g. the query index cannot be written or read
            self.report.not_checked.append(NotChecked("leaderboards", f"ranking failed: {exc.message}"))
            return
        self.report.leaderboards = list(diff.groups)
        for group in diff.groups:
            after = group.after_leader
            if group.new_first and after is not None:
                before = group.before_leader
                if before is None:
                    message = f"{after.implementation} is the first #1 of {group.label}: {latency(after.latency_ns)}"
                else:
                    margin = group.margin or 0.0
                    message = (
                        f"{after.implementation} is the new #1 of {group.label}: {latency(after.latency_ns)}, "
                        f"{margin:.2f}x faster than {before.implementation} ({latency(before.latency_ns)})"
                    )
                self.hint("new-first", message, group=group.key)
                ahead = group.margin
                if before is not None and before.evidence == "verified" and ahead and ahead > 1 + RERUN_MARGIN:
                    self.hint(
                        "rerun-suggested",
                        f"{after.implementation} is {100 * (ahead - 1):.0f}% ahead of the verified record of "
                        f"{before.implementation} in {group.label}: ask a verifier for a rerun before trusting it",
                        group=group.key,
                    )
            elif group.moves:
                self.hint(
                    "rank-change",
                    f"{_count(len(group.moves), 'rank change')} in {group.label}; "
                    f"#1 stays {after.implementation if after else 'empty'}",
                    group=group.key,
                )
        for stale in diff.stale:
            label = " · ".join([stale.definition or "?", stale.workload, stale.gpu])
            observed = f" observed {render.date(stale.leader.observed_at)}" if stale.leader.observed_at else ""
            self.hint(
                "stale-group",
                f"the #1 of {label} ({stale.leader.implementation}{observed}) is stale; "
                "a run of this workload on this GPU would refresh it",
                group=stale.key,
            )

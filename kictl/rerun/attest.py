"""``kictl attest rerun``: check a rerun's unsigned results and sign them (DESIGN §5, §10).

The results come from a machine that ran submitted code, so nothing in them
is taken on trust.  ``check_results`` re-derives everything from the records
in the folder, the registry and the signing key:

* the results are bound to a rerun request this key made before the GPU job
  started (``kictl.rerun.request``): each original was asked for, each rerun's
  ``inputSecret`` and seed salt are the ones derived from the request (so not
  the original's, not zero, not made up), the results and every rerun are
  dated inside the request's window and not in the future, and no rerun of
  the folder is already in the registry (a replay);

* every record in ``records.json`` hashes to the digest its manifest key names;
* each original is a passed BenchmarkRun of this registry, and its job is
  rebuilt from the registry as ``kictl rerun`` did;
* the rerun is another BenchmarkRun (not the original, not older than it) of
  the same definition, workload and implementation, measured under a protocol
  with the original's comparability family, primary statistic, warm-up,
  iterations, trials, correctness rounds and tolerances (the family stands for
  the timer), on an environment with the original's GPU product;
* the verdict, ratio and status the result states are what its records give
  with the tolerance it states; the verdict that is signed is re-judged with
  this registry's ``rerunTolerance`` (as every reader reads it,
  ``kictl.trust.readers``).

``sign_results`` then adds the reruns' records to the registry and signs one
``rerun`` attestation per original: subject the original, predicate
``{runDigest, ratio, verdict, tolerance, nonce, note}`` (``kictl.trust.RerunPredicate``); the
note says the statistic, both latencies, the tolerance, the rerun's spread, the
product and the seed salt.  All or nothing: a single problem and nothing is
written.  Inconclusive results are reported and never signed.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from kictl import derived, trust
from kictl.errors import CheckFailed, KictlError, RecordError
from kictl.records import BenchmarkRunSpec, ExecutionEnvironmentSpec, StoredRecord, parse_timestamp
from kictl.rerun import heldout
from kictl.rerun.job import ProtocolSettings, RerunJob, build_job
from kictl.rerun.request import (
    RequestBody,
    RerunRequest,
    check_binding,
    check_request,
    check_time,
    expected_held_out_secret,
    make_request,
)
from kictl.rerun.results import RerunResult, read_results
from kictl.rerun.session import cpu_tolerance_warnings
from kictl.rerun.verdict import SIGNABLE, Judgement, judge
from kictl.selftest import harness_protocols, require_sound_harness
from kictl.store.files import Transaction
from kictl.store.registry import Registry
from kictl.trust.readers import reader_policy


@dataclass(frozen=True, slots=True)
class CheckedRerun:
    """One result that passed every check, re-judged with the registry's tolerance."""

    result: RerunResult
    job: RerunJob
    rerun: StoredRecord | None
    records: tuple[StoredRecord, ...]  # the rerun's run, protocol and environment
    judgement: Judgement
    nonce: str | None = None  # of the request the rerun was made for

    @property
    def signable(self) -> bool:
        return self.rerun is not None and self.judgement.verdict in SIGNABLE

    def predicate(self) -> dict[str, Any]:
        """The ``rerun`` predicate about the original."""
        assert self.rerun is not None
        judged = self.judgement
        rerun_ns = "-" if judged.rerun_ns is None else f"{judged.rerun_ns} ns"
        spread = "-" if judged.rerun_spread is None else f"±{judged.rerun_spread:.1%}"
        note = (
            f"kictl rerun on {self.result.product}: {judged.statistic} {rerun_ns} against {judged.original_ns} ns "
            f"claimed; tolerance ±{judged.tolerance:g} (policy rerunTolerance); rerun spread {spread}; "
            f"{judged.reason}; correctness rounds on fresh seeds (salt {self.result.seed_salt or '-'})"
        )
        predicate: dict[str, Any] = {"runDigest": self.rerun.digest, "verdict": judged.verdict, "note": note[:4096]}
        if judged.ratio is not None:
            predicate["ratio"] = judged.ratio
        if judged.tolerance > 0:
            predicate["tolerance"] = judged.tolerance
        if self.nonce is not None:
            predicate["nonce"] = self.nonce
        if self.result.held_out is not None:  # issue 32: the held-out check, redrawn by check_results
            predicate["heldOut"] = self.result.held_out.model_dump(mode="json", by_alias=True, exclude_none=True)
        return predicate


@dataclass
class AttestReport:
    """What ``sign_results`` did."""

    checked: list[CheckedRerun] = field(default_factory=list)
    signed: list[tuple[CheckedRerun, Path]] = field(default_factory=list)
    skipped: list[CheckedRerun] = field(default_factory=list)
    added: int = 0
    warnings: list[str] = field(default_factory=list)
    #: every file this signing wrote (records and envelopes), relative to the registry root, sorted
    written: list[str] = field(default_factory=list)


def _settings(settings: ProtocolSettings) -> dict[str, Any]:
    return {key: value for key, value in settings.to_json().items() if key not in ("timer", "harness")}


@dataclass(frozen=True, slots=True)
class _Binding:
    """What a result is checked against: the request, the signing key and the signer's clock."""

    body: RequestBody
    private_key: Ed25519PrivateKey
    now: datetime


def _check_one(
    registry: Registry,
    result: RerunResult,
    records: dict[str, StoredRecord],
    tolerance: float,
    binding: _Binding,
) -> CheckedRerun:
    """Raises ``CheckFailed`` (or another ``KictlError``) naming what does not hold."""
    body = binding.body
    if result.original not in body.runs:
        raise CheckFailed(f"the rerun request (nonce {body.nonce}) did not ask for it")
    job = build_job(registry, result.original)
    if result.rerun is None:
        if result.verdict != "inconclusive":
            raise CheckFailed(f"it claims {result.verdict} without a rerun BenchmarkRun")
        judged = judge(job.run_spec, None, tolerance=tolerance, missing=result.reason)
        return CheckedRerun(result, job, None, (), judged, body.nonce)
    if result.rerun == result.original:
        raise CheckFailed("the rerun it names is the original run itself")
    rerun = records.get(result.rerun)
    if rerun is None:
        raise CheckFailed(f"its rerun {result.rerun} is not in records.json")
    if rerun.kind != "BenchmarkRun":
        raise CheckFailed(f"its rerun {result.rerun} is a {rerun.kind}, not a BenchmarkRun")
    spec = rerun.model.spec
    assert isinstance(spec, BenchmarkRunSpec)
    original = job.run_spec
    for member in ("definitionDigest", "workloadDigest", "implementationDigest"):
        if rerun.raw["spec"].get(member) != job.run.raw["spec"].get(member):
            raise CheckFailed(f"the rerun {rerun.digest} has another {member} than the original")
    if registry.has_record(rerun.digest):
        raise CheckFailed(f"its rerun {rerun.digest} is already in the registry: a rerun is signed once")
    check_binding(
        body,
        binding.private_key,
        original=result.original,
        original_secret=original.input_secret,
        rerun_secret=spec.input_secret,
        seed_salt=result.seed_salt,
    )
    check_time("the rerun was observed at", spec.observed_at, body, now=binding.now)
    if result.status != spec.status:
        raise CheckFailed(f"it states status {result.status}; its rerun BenchmarkRun says {spec.status}")
    if parse_timestamp(spec.observed_at) < parse_timestamp(original.observed_at):
        raise CheckFailed(f"the rerun was observed at {spec.observed_at}, before the original ({original.observed_at})")
    # The folder must hold the protocol and environment its rerun was measured under (``kictl rerun`` writes
    # them): the harness check reads the protocol, so one left out would be a harness nobody checked.
    protocol = records.get(spec.protocol_digest)
    environment = records.get(spec.environment_digest)
    if protocol is None or protocol.kind != "BenchmarkProtocol":
        raise CheckFailed(
            f"the rerun's protocol {spec.protocol_digest} is not in records.json: the results must hold the protocol "
            "their rerun was measured under (its harness is checked), never one taken from the registry"
        )
    if environment is None or environment.kind != "ExecutionEnvironment":
        raise CheckFailed(
            f"the rerun's environment {spec.environment_digest} is not in records.json: the results must hold the "
            "environment their rerun ran on"
        )
    if spec.timing is not None:  # the rerun's figures are its samples' (kictl.derived), never a stated one
        figures = derived.timing_figures(spec.timing)
        if not figures.from_samples:
            raise CheckFailed(f"the rerun {rerun.digest} keeps no samples: its figures cannot be derived")
        if figures.contradictions:
            said = "; ".join(item.text() for item in figures.contradictions)
            raise CheckFailed(f"the rerun {rerun.digest} contradicts its own samples ({derived.TIMING_LINT}): {said}")
    comparable = True
    # The comparability family stands for the timer and the harness (a new kictl may time a family
    # differently); every other setting must be the original's.
    ours, theirs = _settings(ProtocolSettings.from_protocol(protocol)), _settings(job.settings)
    if ours != theirs:
        mismatched = sorted(key for key, value in ours.items() if theirs.get(key) != value)
        if not result.forced:
            raise CheckFailed(f"the rerun's protocol differs from the original's in {', '.join(mismatched)}")
        comparable = False
    env_spec = environment.model.spec
    assert isinstance(env_spec, ExecutionEnvironmentSpec)
    if env_spec.hardware.product != job.product:
        if not result.forced:
            raise CheckFailed(f"the rerun ran on {env_spec.hardware.product}, the original on {job.product}")
        comparable = False
    if result.forced:
        comparable = False
    # The document must say what its records say (with the tolerance it used) ...
    stated = judge(original, spec, tolerance=result.tolerance, comparable=comparable)
    if stated.verdict != result.verdict or stated.ratio != result.ratio:
        raise CheckFailed(
            f"it claims {result.verdict} (ratio {result.ratio}); its records give {stated.verdict} "
            f"(ratio {stated.ratio}) at tolerance {result.tolerance:g}"
        )
    # issues 32, 41: the held-out check the definition requires, redrawn here from the request's secret
    try:
        heldout.require_held_out(
            job.definition,
            heldout.submitted_shapes(registry, job.definition),
            result.held_out,
            secret=expected_held_out_secret(body, binding.private_key),
            cap=heldout.CPU_CAP if _measured_on_cpu(protocol) else None,
        )
    except RecordError as exc:
        raise CheckFailed(f"{exc.message} (rerun request nonce {body.nonce})") from exc
    # ... and what is signed is judged with this registry's tolerance.
    judged = judge(original, spec, tolerance=tolerance, comparable=comparable)
    return CheckedRerun(result, job, rerun, (rerun, protocol, environment), judged, body.nonce)


def _measured_on_cpu(protocol: StoredRecord) -> bool:
    """Whether a protocol measured a CPU (its device; a CPU timer where the device is not said): the held-out draw's
    cap (``heldout.CPU_CAP``) follows from it, never from what the results claim."""
    measurement = protocol.raw["spec"].get("measurement") or {}
    device = measurement.get("device")
    if device is not None:
        return bool(device == "cpu")
    return bool(measurement.get("timer") == "perf_counter_ns")


def check_results(
    registry: Registry, folder: Path, key_path: Path, *, now: datetime | None = None
) -> list[CheckedRerun]:
    """Check every result of ``folder`` against its request, its records, the registry and the key at ``key_path``.

    Raises ``CheckFailed`` listing every problem (a folder made for no request
    of this key, or a request dated in the future, is one problem for all),
    ``UsageError`` for a folder without results, ``RecordError`` for malformed
    files or digests, ``EnvError`` for an unusable key.
    """
    document, records = read_results(folder)
    private_key = trust.load_private_key(key_path)
    keyid = trust.keyid_of(private_key.public_key())
    moment = now or datetime.now(UTC)
    if document.request is None:
        raise CheckFailed(
            "the results name no rerun request: only reruns made for a request of the signing key "
            "(`kictl attest request`, then `kictl rerun --request`) can be signed"
        )
    body = document.request
    check_request(body, keyid, now=moment)
    check_time("the results were written at", document.created_at, body, now=moment)
    nonce_used = _nonce_signed(registry, body)
    if nonce_used is not None:
        raise CheckFailed(f"the rerun request (nonce {body.nonce}) was signed before: {nonce_used}")
    binding = _Binding(body, private_key, moment)
    tolerance = reader_policy(registry).rerun_tolerance
    checked: list[CheckedRerun] = []
    problems: list[str] = []
    seen: set[str] = set()
    for result in document.results:
        if result.original in seen:
            problems.append(f"rerun of {result.original}: the results hold more than one result for it")
            continue
        seen.add(result.original)
        try:
            checked.append(_check_one(registry, result, records, tolerance, binding))
        except KictlError as exc:
            problems.append(f"rerun of {result.original}: {exc.message}")
    if problems:
        raise CheckFailed(
            f"{len(problems)} of {len(document.results)} rerun result(s) do not check out", details=problems
        )
    return checked


def _nonce_signed(registry: Registry, body: RequestBody) -> str | None:
    """An envelope about one of ``body``'s runs whose ``rerun`` predicate states ``body.nonce``; never raises.

    The payload is read without verifying it: any envelope that claims the
    nonce, valid or not, is reason enough to refuse signing it again.
    """
    for digest in body.runs:
        folder = registry.attestation_folder(digest)
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            try:
                statement = json.loads(base64.b64decode(json.loads(path.read_bytes())["payload"]))
                nonce = statement["predicate"].get("nonce")
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                continue
            if nonce == body.nonce:
                return registry.relative(path)
    return None


def make_key_request(key_path: Path, runs: list[str], *, hours: float = 6.0) -> RerunRequest:
    """A rerun request for ``runs`` by the key at ``key_path``; raises ``EnvError``/``UsageError``."""
    private_key = trust.load_private_key(key_path)
    return make_request(runs, private_key, trust.keyid_of(private_key.public_key()), window=timedelta(hours=hours))


def key_roles(registry: Registry, key_path: Path) -> tuple[str, tuple[str, ...]]:
    """The keyid of the private key at ``key_path`` and its roles in the trust root (none if unlisted).

    Raises ``EnvError`` for an unusable key, ``CheckFailed`` when the trust root does not verify.
    """
    keyid = trust.keyid_of(trust.load_private_key(key_path).public_key())
    root = trust.registry_root(registry)
    listed = root.keys.get(keyid)
    return keyid, (tuple(listed.roles) if listed is not None else ())


def sign_results(registry: Registry, folder: Path, key_path: Path, *, require_verifier: bool = False) -> AttestReport:
    """Check ``folder`` (``check_results``), add the reruns' records and sign a ``rerun`` attestation each.

    With ``require_verifier`` a key without the ``verifier`` role in the trust
    root is refused (``CheckFailed``); without it, such a signature is made and
    counts as a community rerun.  Raises what ``check_results`` raises,
    ``EnvError`` for an unusable key, ``RegistryError`` on I/O errors; nothing
    is written unless everything checks out.
    """
    keyid, roles = key_roles(registry, key_path)
    if require_verifier and "verifier" not in roles:
        raise CheckFailed(
            f"key {keyid[:12]} has no verifier role in the trust root"
            + (f" (its roles: {', '.join(roles)})" if roles else " (it is not listed)")
        )
    report = AttestReport(warnings=trust.signing_warnings(registry, key_path, "rerun"))
    report.checked = check_results(registry, folder, key_path)
    report.warnings.extend(
        cpu_tolerance_warnings([item.job for item in report.checked], reader_policy(registry).rerun_tolerance)
    )
    # every signable rerun's protocol (check_results made sure the folder holds it): its harness must have
    # passed its selftest and be named by no open advisory (docs/rerun.md "What the signer re-derives")
    measured = harness_protocols(record for item in report.checked if item.signable for record in item.records)
    require_sound_harness(registry, folder, measured)
    with Transaction() as transaction:
        added: dict[str, StoredRecord] = {}
        for item in report.checked:
            if not item.signable:
                report.skipped.append(item)
                continue
            for record in item.records:
                if not registry.has_record(record.digest):
                    added.setdefault(record.digest, record)
        for done in registry.add(list(added.values()), transaction=transaction):
            if done.created:
                report.written.append(registry.relative(done.path))
        report.added = len(added)
        for item in report.checked:
            if item.signable:
                path = trust.sign_record(
                    registry,
                    item.job.run.digest,
                    key_path,
                    predicate_type="rerun",
                    predicate=item.predicate(),
                    transaction=transaction,
                )
                report.signed.append((item, path))
                report.written.append(registry.relative(path))
    report.written.sort()
    return report

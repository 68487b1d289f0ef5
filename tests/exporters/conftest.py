"""A small signed registry for the export tests: real records, real Ed25519 keys, real git.

One GEMM-like definition (``World`` of tests/rank) with three workloads on an
H200 and one on a B200.  Every run is signed by a submitter key (``reported``);
the runs in ``VERIFIED`` also carry a verifier's ``rerun`` attestation
(``verified``).  The interesting rows:

* ``m2``: ``hasty`` is the fastest but only reported; ``tiled`` is the verified #1.
* ``m8``: ``tiled`` is faster but only reported; ``plain`` is the verified #1.
* a second definition whose verified winner is named ``../../escape``.

The registry is built once per session; tests export into their own folders.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kictl import trust
from kictl.records import BenchmarkRunSpec, LatencyNs, RunCorrectness, StoredRecord, Timing, new_record
from kictl.store.registry import Registry
from tests.rank.conftest import REFERENCE, World, days_ago
from tests.trust.conftest import EPOCH, at, commit_all, make_key


@dataclass(frozen=True)
class Signed:
    registry: Registry
    runs: dict[str, StoredRecord]  # "<implementation>/<workload>[@gpu]" -> run
    records: dict[str, StoredRecord]  # name -> record (definitions, workloads, implementations)


#: An implementation that says it ran (FlashInfer-Bench's apply runs the exported one in the test process).
MARKED = 'import os\n\n\ndef run(A, B):\n    os.environ["KICTL_APPLIED"] = "{name}"\n    return A @ B.T\n'
#: (implementation, workload, latency ns, gpu, verified)
RUNS = (
    ("hasty", "m2", 500, "H200", False),
    ("tiled", "m2", 800, "H200", True),
    ("plain", "m2", 1_000, "H200", True),
    ("reference", "m2", 5_000, "H200", True),
    ("tiled", "m4", 900, "H200", True),
    ("plain", "m4", 1_200, "H200", True),
    ("tiled", "m8", 2_500, "H200", False),
    ("plain", "m8", 3_000, "H200", True),
    ("tiled", "m2", 100, "B200", True),
)


def _run(
    world: World, workload: StoredRecord, impl: StoredRecord, protocol: StoredRecord, env: StoredRecord, latency: int
) -> StoredRecord:
    """A passed run with both errors FlashInfer-Bench's apply filters on."""
    spec = BenchmarkRunSpec(
        status="passed",
        timing=Timing(latency_ns=LatencyNs(median=latency), samples=(latency,) * 5, primary_statistic="median"),
        observed_at=days_ago(1),
        correctness=RunCorrectness(comparator="allclose", maximum_absolute_error=0.001, maximum_relative_error=0.002),
        workload_digest=workload.digest,
        implementation_digest=impl.digest,
        protocol_digest=protocol.digest,
        environment_digest=env.digest,
    )
    record = new_record(spec, name=f"{impl.name}.{workload.name}.{latency}")
    world.registry.add([record])
    return record


@pytest.fixture(scope="session")
def signed(tmp_path_factory: pytest.TempPathFactory) -> Signed:
    base = tmp_path_factory.mktemp("export-world")
    world = World(base / "registry")
    registry = world.registry
    keys = base / "keys"
    maintainer, submitter, verifier = (make_key(keys, owner) for owner in ("maintainer", "submitter", "verifier"))
    signing = [maintainer.load()]
    trust.init_root(
        registry, maintainers=[(trust.load_public_key(maintainer.public), "maintainer")], keys=signing, not_before=EPOCH
    )
    for files, role in ((submitter, "submitter"), (verifier, "verifier")):
        trust.add_key(
            registry,
            trust.load_public_key(files.public),
            owner=files.owner,
            roles=[role],
            keys=signing,
            not_before=EPOCH,
        )
    definition = world.definition()
    workloads = {name: world.workload(definition, name, m) for name, m in (("m2", 2), ("m4", 4), ("m8", 8))}
    impls = {
        name: world.implementation(definition, name, MARKED.format(name=name)) for name in ("hasty", "tiled", "plain")
    }
    impls["reference"] = world.implementation(definition, "reference", REFERENCE)
    protocol = world.protocol()
    environments = {gpu: world.environment(f"NVIDIA {gpu}") for gpu in ("H200", "B200")}
    other = world.definition("gemm_n64_k64_other")
    other_workload = world.workload(other, "m3", 3)
    escape = world.implementation(other, "../../escape")
    world.add()
    runs: dict[str, StoredRecord] = {}
    verified: list[StoredRecord] = []
    for impl, workload, latency, gpu, is_verified in RUNS:
        run = _run(world, workloads[workload], impls[impl], protocol, environments[gpu], latency)
        key = f"{impl}/{workload}" + ("" if gpu == "H200" else f"@{gpu}")
        runs[key] = run
        if is_verified:
            verified.append(run)
    runs["escape/m3"] = _run(world, other_workload, escape, protocol, environments["H200"], 700)
    verified.append(runs["escape/m3"])
    for run in runs.values():
        trust.sign_record(registry, run.digest, submitter.private, predicate_type="submission")
    held_out = {  # what the verifier's reruns found on held-out shapes (kictl.rerun.heldout)
        runs["tiled/m4"].digest: "generalizes",
        runs["plain/m8"].digest: "fails on held-out shapes",
        runs["escape/m3"].digest: "generalizes",
    }
    for run in verified:
        predicate: dict[str, object] = {"runDigest": "sha256:" + "ab" * 32, "verdict": "agrees", "ratio": 1.0}
        verdict = held_out.get(run.digest)
        if verdict is not None:
            shapes = [{"M": 5, "N": 64, "K": 64}, {"M": 11, "N": 64, "K": 64}]
            failed = [{"axes": shapes[1], "status": "incorrect_numerical"}] if verdict != "generalizes" else []
            predicate["heldOut"] = {"verdict": verdict, "shapes": shapes, "failed": failed, "secret": "5e" * 16}
        trust.sign_record(registry, run.digest, verifier.private, predicate_type="rerun", predicate=predicate)
    commit_all(registry, at("2026-06-01"), "signed runs")
    records = {record.name: record for record in (definition, other, other_workload, escape, *workloads.values())}
    records.update(impls)
    return Signed(registry, runs, records)

"""Fixtures of the rerun tests: real original runs made by ``kictl bench`` on the CPU, real keys, real git.

``origin`` is made once per session: the bundled definitions in a git
repository whose trust root lists a maintainer, a submitter, a verifier and
a "community" key (submitter role only); the policy's ``rerunTolerance`` is
0.25.  ``kictl bench --sign`` adds and signs, on rmsnorm_h4096/b1, the torch
and reference implementations, a *paced* implementation (its latency hardly
depends on how busy the CPU is) and one *tuned to the published seeds* (which a bench that draws secret seeds
itself fails at once: its submitter then claims it passed, a made-up run); on
gemm_n4096_k4096/m1 the torch and reference implementations.  Two runs are
then made up from the paced one and signed as the submitter: one whose
median was edited down 40%, one whose environment names another CPU.

A busy, shared CI CPU does not reproduce PyTorch kernel latencies within a
tight tolerance (ratios of 0.4 and 1.7 were seen on one machine within a
minute), so the reruns of the PyTorch kernels are judged in ``wide``, a copy
whose policy says ``rerunTolerance: 4.0``; the tight verdicts (agrees,
disagrees) are tested with the paced implementation at 0.25.

Reruns write to ``--out`` folders and never change the registry, so the two
rerun sessions are made once and shared; a test that signs copies the registry
first (``clone``).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from kictl import canon, trust
from kictl.cli import make_app
from kictl.records import StoredRecord, record_from_value
from kictl.store.registry import Registry
from tests.conftest import REPO_ROOT, copy_bundled

ASSETS = Path(__file__).resolve().parent / "assets"
IMPLEMENTATIONS = REPO_ROOT / "implementations"
EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
TIGHT = 0.25
WIDE = 4.0
OPTIONS = ("--device", "cpu", "--warmup", "1", "--iterations", "5", "--trials", "1", "--rounds", "2")
OWNERS = ("maintainer", "submitter", "verifier", "community")


def invoke(*args: str | Path) -> Result:
    """kictl in-process (session-scoped fixtures cannot use the function-scoped ``cli``)."""
    return CliRunner().invoke(make_app(), [str(arg) for arg in args], catch_exceptions=False)


def commit(root: Path, message: str) -> None:
    Registry(root).git.commit(["registry"], message)


def set_tolerance(root: Path, tolerance: float) -> None:
    path = root / "registry" / "policy.json"
    policy = json.loads(path.read_text())
    policy["rerunTolerance"] = tolerance
    path.write_bytes(canon.pretty_bytes(policy))


@dataclass(frozen=True)
class Origin:
    """The registry with the original runs, the key files and the runs' digests by role."""

    root: Path
    keys: Path
    runs: dict[str, str]

    def key(self, owner: str) -> Path:
        return self.keys / f"{owner}.key"


def clone(root: Path, target: Path) -> Registry:
    """A copy of a registry, git history and all, to sign into."""
    shutil.copytree(root, target)
    return Registry(target)


def _bench(root: Path, definition: str, *impls: Path, workload: str, key: Path) -> dict[str, dict[str, Any]]:
    args: list[str | Path] = ["bench", definition, "--workload", workload, *OPTIONS, "--registry", root, "--json"]
    for impl in impls:
        args += ["--impl", impl]
    result = invoke(*args, "--sign", key)
    assert result.exit_code in (0, 1), result.output
    rows = {row["implementation"].rsplit("_", 1)[0]: row for row in json.loads(result.stdout)}
    assert all(row["status"] == "passed" for name, row in rows.items() if name != "seed_tuned_rmsnorm"), rows
    return rows


def _made_up(registry: Registry, run: StoredRecord, spec_change: dict[str, Any], name: str) -> StoredRecord:
    raw = json.loads(json.dumps(run.raw))
    raw["metadata"]["name"] = name
    raw["spec"].update(spec_change)
    return record_from_value(raw, source=name)


@pytest.fixture(scope="session")
def origin(tmp_path_factory: pytest.TempPathFactory) -> Origin:
    base = tmp_path_factory.mktemp("rerun")
    root = base / "origin"
    registry = copy_bundled(root)
    keys = base / "keys"
    for owner in OWNERS:
        trust.generate_keypair(keys / f"{owner}.key", owner=owner)
    maintainer = trust.load_private_key(keys / "maintainer.key")
    trust.init_root(
        registry,
        maintainers=[(trust.load_public_key(keys / "maintainer.key.pub"), "maintainer")],
        keys=[maintainer],
        not_before=EPOCH,
    )
    for owner, role in (("submitter", "submitter"), ("verifier", "verifier"), ("community", "submitter")):
        public = trust.load_public_key(keys / f"{owner}.key.pub")
        trust.add_key(registry, public, owner=owner, roles=[role], keys=[maintainer], not_before=EPOCH)
    set_tolerance(root, TIGHT)
    trust.sign_policy(registry, keys=[maintainer])  # readers count a policy only when the trust root signs it
    commit(root, "Trust root and policy")
    submitter = keys / "submitter.key"
    rms = IMPLEMENTATIONS / "rmsnorm_h4096"
    runs = _bench(
        root,
        "rmsnorm_h4096",
        rms / "torch_rmsnorm",
        rms / "reference",
        ASSETS / "paced_rmsnorm.py",
        ASSETS / "seed_tuned_rmsnorm.py",
        workload="b1",
        key=submitter,
    )
    gemm = IMPLEMENTATIONS / "gemm_n4096_k4096"
    gemm_runs = _bench(
        root, "gemm_n4096_k4096", gemm / "torch_matmul", gemm / "reference", workload="m1", key=submitter
    )
    named = {
        "rmsnorm_torch": runs["torch_rmsnorm"]["run"],
        "rmsnorm_reference": runs["reference"]["run"],
        "paced": runs["paced_rmsnorm"]["run"],
        "tuned": runs["seed_tuned_rmsnorm"]["run"],
        "gemm_torch": gemm_runs["torch_matmul"]["run"],
        "gemm_reference": gemm_runs["reference"]["run"],
    }
    paced = registry.load(named["paced"])
    made_up = []
    if runs["seed_tuned_rmsnorm"]["status"] != "passed":
        # A bench that draws secret seeds itself (issue 10) fails the tuned implementation at once; its
        # submitter then claims it passed: the paced run's numbers, naming the tuned implementation.
        tuned = registry.load(named["tuned"])
        claim = _made_up(
            registry,
            paced,
            {"implementationDigest": tuned.raw["spec"]["implementationDigest"]},
            "seed-tuned-claimed-passed",
        )
        made_up.append(claim)
        named["tuned"] = claim.digest
    timing = json.loads(json.dumps(paced.raw["spec"]["timing"]))
    timing["latencyNs"]["median"] = int(timing["latencyNs"]["median"] * 0.6)
    edited = _made_up(registry, paced, {"timing": timing}, "paced-median-edited-down-40pct")
    environment = registry.load(paced.raw["spec"]["environmentDigest"])
    other_env = json.loads(json.dumps(environment.raw))
    other_env["spec"]["hardware"]["product"] = "Imaginary CPU 9000"
    other_env["metadata"]["name"] = "imaginary-cpu-9000"
    other_environment = record_from_value(other_env, source="other environment")
    elsewhere = _made_up(registry, paced, {"environmentDigest": other_environment.digest}, "paced-on-an-imaginary-cpu")
    registry.add([edited, other_environment, elsewhere, *made_up])
    for record in (edited, elsewhere, *made_up):
        trust.sign_record(registry, record.digest, submitter)
    named["edited"] = edited.digest
    named["elsewhere"] = elsewhere.digest
    commit(root, "Original runs, signed by the submitter")
    return Origin(root=root, keys=keys, runs=named)


@dataclass(frozen=True)
class Reruns:
    """One ``kictl rerun --out`` session: the registry it read, its folder and what it printed."""

    root: Path
    folder: Path
    result: Result

    @property
    def verdicts(self) -> dict[str, dict[str, Any]]:
        return {row["original"]: row for row in json.loads(self.result.stdout)}


def make_request(root: Path, digests: list[str], key: Path, path: Path) -> Path:
    """``kictl attest request``: what the signing side writes before the GPU job starts."""
    made = invoke("attest", "request", *digests, "--key", key, "--out", path, "--registry", root)
    assert made.exit_code == 0, made.output
    return path


def _rerun(root: Path, folder: Path, digests: list[str], key: Path) -> Reruns:
    request = make_request(root, digests, key, folder.parent / "request.json")
    result = invoke("rerun", "--request", request, "--registry", root, "--out", folder, "--json")
    return Reruns(root=root, folder=folder, result=result)


@pytest.fixture(scope="session")
def tight(origin: Origin, tmp_path_factory: pytest.TempPathFactory) -> Reruns:
    """Reruns at the origin's tolerance (0.25): the paced run, its edited copy, the seed-tuned run."""
    folder = tmp_path_factory.mktemp("tight") / "out"
    runs = origin.runs
    return _rerun(origin.root, folder, [runs["paced"], runs["edited"], runs["tuned"]], origin.key("verifier"))


@pytest.fixture(scope="session")
def wide(origin: Origin, tmp_path_factory: pytest.TempPathFactory) -> Reruns:
    """Reruns of the PyTorch kernels in a copy of the origin whose rerunTolerance is 4.0."""
    base = tmp_path_factory.mktemp("wide")
    registry = clone(origin.root, base / "registry")
    set_tolerance(registry.root, WIDE)
    trust.sign_policy(registry, keys=[trust.load_private_key(origin.key("maintainer"))])
    commit(registry.root, "A tolerance for a shared CPU")
    runs = origin.runs
    digests = [runs[name] for name in ("rmsnorm_torch", "rmsnorm_reference", "gemm_torch", "gemm_reference")]
    reruns = _rerun(registry.root, base / "out", digests, origin.key("verifier"))
    if reruns.result.exit_code == 1:
        # A CPU rerun is timed on this shared 2-core machine: the other test process (the cheat corpus's spinning
        # entries, issue 40's floods) can starve it for a while, once seen as 79x slower and a samplesConsistent
        # failure of the honest reference. One more rerun, with a request of its own, is what a verifier would do.
        (base / "again").mkdir()
        reruns = _rerun(registry.root, base / "again" / "out", digests, origin.key("verifier"))
    return reruns

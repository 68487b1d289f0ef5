"""``kictl attest rerun`` re-derives what it signs and infers nothing from absence (issue 41).

The folder comes from the machine that ran submitted code.  Real folders made by ``kictl rerun --request``
(the session's ``tight`` one, and one of a definition that states legal shapes, made here) are edited the way
that machine could edit them: the protocol left out of ``records.json`` (so that no harness check sees it), a
rerun whose stated median contradicts its own samples, a held-out result dropped or ``skipped`` with no shapes
for a definition that requires one.  Each is refused and nothing is written.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kictl import canon, trust
from kictl.advisories.document import new_advisory
from kictl.advisories.published import publish_advisory
from kictl.records import DefinitionSpec, new_record, record_from_value
from kictl.standing.heldout import GENERALIZES
from kictl.store.registry import Registry
from tests.advisories.conftest import advisory_fields
from tests.conftest import REPO_ROOT, RunCli
from tests.rerun.conftest import OPTIONS, WIDE, Origin, Reruns, clone, commit, invoke, set_tolerance

pytestmark = pytest.mark.slow  # the rerun sessions of conftest.py, and one of its own

LEGAL = ["1 <= batch_size <= 16384"]


def _edited(source: Path, tmp_path: Path, change: Callable[[dict[str, Any], dict[str, Any]], None]) -> Path:
    """A copy of a results folder with ``change(results, records)`` applied to its two documents."""
    folder = tmp_path / "edited"
    shutil.copytree(source, folder)
    results = json.loads((folder / "reruns.json").read_text())
    records = json.loads((folder / "records.json").read_text())
    change(results, records)
    (folder / "reruns.json").write_bytes(canon.pretty_bytes(results))
    (folder / "records.json").write_bytes(canon.pretty_bytes(records))
    return folder


def _signed(cli: RunCli, root: Path, folder: Path, key: Path, tmp_path: Path) -> tuple[Any, bool]:
    """``kictl attest rerun`` into a copy of ``root``: its result, and whether it wrote nothing."""
    registry = clone(root, tmp_path / "registry")
    before = sorted(registry.root.joinpath("registry").rglob("*"))
    result = cli("attest", "rerun", folder, "--key", key, "--registry", registry.root)
    return result, sorted(registry.root.joinpath("registry").rglob("*")) == before


def _without(kind: str) -> Callable[[dict[str, Any], dict[str, Any]], None]:
    def change(_results: dict[str, Any], records: dict[str, Any]) -> None:
        for label in [label for label, record in records.items() if record["kind"] == kind]:
            del records[label]

    return change


@pytest.mark.parametrize("kind", ["BenchmarkProtocol", "ExecutionEnvironment"])
def test_a_folder_that_leaves_out_the_protocol_or_environment_is_refused(
    cli: RunCli, origin: Origin, tight: Reruns, tmp_path: Path, kind: str
) -> None:
    """The rerun's protocol is the original's (the same harness): it is in the registry, and was taken from there,
    so that no harness check ever saw it.  With no selftest recorded and an open advisory naming this harness,
    the folder was signed."""
    home = Path(os.environ["KICTL_CONFIG_HOME"])
    (home / "selftest.json").unlink()
    root = clone(origin.root, tmp_path / "advised").root
    advisory = advisory_fields(affects={"harness": "kictl", "versions": [{"introduced": "0", "fixed": "99.0"}]})
    advisory["fixed"] = {"version": "99.0"}
    publish_advisory(Registry(root), new_advisory(advisory), [trust.load_private_key(origin.key("maintainer"))])
    commit(root, "An open advisory naming this harness")
    folder = _edited(tight.folder, tmp_path, _without(kind))
    result, unchanged = _signed(cli, root, folder, origin.key("verifier"), tmp_path)
    assert result.exit_code == 1, result.output
    what = "protocol" if kind == "BenchmarkProtocol" else "environment"
    assert f"the rerun's {what} sha256:" in result.stderr
    assert "is not in records.json" in result.stderr
    assert unchanged
    # the folder as written: its protocol is checked, so the advisory refuses it ...
    whole, unchanged = _signed(cli, root, tight.folder, origin.key("verifier"), tmp_path / "whole")
    assert whole.exit_code == 1, whole.output
    assert "is named by open advisory KI-2026-0001" in whole.stderr
    assert unchanged
    # ... and, with no advisory, so does the missing selftest
    plain, unchanged = _signed(cli, origin.root, tight.folder, origin.key("verifier"), tmp_path / "plain")
    assert plain.exit_code == 1, plain.output
    assert "no passing selftest of the rerun's harness kictl" in plain.stderr
    assert unchanged


def test_a_rerun_whose_median_contradicts_its_samples_is_refused(
    cli: RunCli, origin: Origin, tight: Reruns, tmp_path: Path
) -> None:
    """The GPU machine restates its rerun's median (to agree with a claim) and re-addresses the record."""

    def restate(results: dict[str, Any], records: dict[str, Any]) -> None:
        row = next(row for row in results["results"] if row["original"] == origin.runs["edited"])
        label = f"BenchmarkRun/{canon.digest_hex(row['rerun'])}"
        raw = records.pop(label)
        raw["spec"]["timing"]["latencyNs"]["median"] = row["originalNs"]  # what the edited original claims
        rerun = record_from_value(raw, source="restated rerun")
        records[f"BenchmarkRun/{canon.digest_hex(rerun.digest)}"] = raw
        row["rerun"] = rerun.digest
        row["rerunNs"] = row["originalNs"]
        row["verdict"], row["ratio"] = "agrees", 1.0

    folder = _edited(tight.folder, tmp_path, restate)
    result, unchanged = _signed(cli, origin.root, folder, origin.key("verifier"), tmp_path)
    assert result.exit_code == 1, result.output
    assert "contradicts its own samples (timing-contradicts-samples): median stated" in result.stderr
    assert unchanged


@dataclass(frozen=True)
class Legal:
    """A registry whose rmsnorm definition states legal batch sizes, a signed run of it, and its rerun's folder."""

    root: Path
    folder: Path
    run: str


@pytest.fixture(scope="module")
def legal(origin: Origin, tmp_path_factory: pytest.TempPathFactory) -> Legal:
    base = tmp_path_factory.mktemp("legal")
    registry = clone(origin.root, base / "registry")
    set_tolerance(
        registry.root, WIDE
    )  # a shared CPU does not repeat latencies closely; the held-out check is the point
    trust.sign_policy(registry, keys=[trust.load_private_key(origin.key("maintainer"))])
    original = registry.resolve("rmsnorm_h4096", ["Definition"])
    spec = json.loads(json.dumps(original.raw["spec"]))
    spec.update(name="rmsnorm_h4096_legal", constraints=LEGAL)
    definition = new_record(DefinitionSpec.model_validate_json(json.dumps(spec)), name="rmsnorm_h4096_legal")
    workloads = []
    for record in registry.iter_records(["Workload"]):
        if record.raw["spec"]["definitionDigest"] == original.digest:
            raw = json.loads(json.dumps(record.raw))
            raw["spec"]["definitionDigest"] = definition.digest
            workloads.append(record_from_value(raw))
    registry.add([definition, *workloads])
    commit(registry.root, "rmsnorm_h4096 with legal axis values")
    impl = REPO_ROOT / "implementations" / "rmsnorm_h4096" / "torch_rmsnorm"
    benched = invoke(
        "bench", "rmsnorm_h4096_legal", "--workload", "b7", *OPTIONS, "--impl", impl, "--registry", registry.root,
        "--json", "--sign", origin.key("submitter"),
    )  # fmt: skip
    assert benched.exit_code == 0, benched.output
    (row,) = json.loads(benched.stdout)
    commit(registry.root, "the run")
    request = base / "request.json"
    asked = invoke(
        "attest", "request", row["run"], "--key", origin.key("verifier"), "--out", request, "--registry", registry.root
    )
    assert asked.exit_code == 0, asked.output
    folder = base / "reruns"
    rerun = invoke("rerun", "--request", request, "--registry", registry.root, "--out", folder, "--json")
    assert rerun.exit_code in (0, 1), rerun.output
    return Legal(registry.root, folder, row["run"])


def _held_out(change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any], dict[str, Any]], None]:
    def edit(results: dict[str, Any], _records: dict[str, Any]) -> None:
        (row,) = results["results"]
        change(row)

    return edit


def _drop(row: dict[str, Any]) -> None:
    del row["heldOut"]


def _skipped_without_shapes(row: dict[str, Any]) -> None:
    row["heldOut"] = {"verdict": "skipped", "note": "not run"}


def _skipped_with_shapes(row: dict[str, Any]) -> None:
    row["heldOut"].update(verdict="skipped", failed=[], note="0 of 3 held-out shape(s) judged")


def _uncapped(row: dict[str, Any]) -> None:
    row["heldOut"]["cap"] = 16384  # drawn up to the legal maximum, where a CPU rerun draws up to 64


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (_drop, "it holds no held-out result, and definition rmsnorm_h4096_legal states legal shapes"),
        (_skipped_without_shapes, "its held-out check was skipped with no shapes (not run), and definition"),
        (_skipped_with_shapes, "its held-out check was skipped on 3 shape(s)"),
        (_uncapped, "its held-out shapes were drawn up to 16384; this rerun's device draws up to 64"),
    ],
    ids=["no-held-out", "skipped-no-shapes", "skipped-with-shapes", "another-cap"],
)
def test_a_held_out_result_the_definition_requires_is_never_inferred_from_absence(
    cli: RunCli, origin: Origin, legal: Legal, tmp_path: Path, change: Callable[[dict[str, Any]], None], message: str
) -> None:
    folder = _edited(legal.folder, tmp_path, _held_out(change))
    result, unchanged = _signed(cli, legal.root, folder, origin.key("verifier"), tmp_path)
    assert result.exit_code == 1, result.output
    assert message in result.stderr
    assert unchanged


def test_the_honest_held_out_folder_is_signed_with_its_verdict(
    cli: RunCli, origin: Origin, legal: Legal, tmp_path: Path
) -> None:
    (row,) = json.loads((legal.folder / "reruns.json").read_text())["results"]
    assert row["heldOut"]["verdict"] == GENERALIZES, row["heldOut"]  # the torch kernel is right on any batch
    assert row["heldOut"]["cap"] == 64
    assert len(row["heldOut"]["shapes"]) == 3
    result, unchanged = _signed(cli, legal.root, legal.folder, origin.key("verifier"), tmp_path)
    assert result.exit_code == 0, result.output
    assert not unchanged

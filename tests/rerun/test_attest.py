"""``kictl attest rerun`` trusts nothing in the folder it is given: each defect is refused, nothing is written."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kictl import canon
from kictl.store.registry import Registry
from tests.conftest import RunCli
from tests.rerun.conftest import Origin, Reruns, clone, commit

pytestmark = pytest.mark.slow  # uses the shared rerun session of conftest.py


def _tampered(tight: Reruns, tmp_path: Path, name: str, change: Callable[[Any], None]) -> Path:
    folder = tmp_path / "tampered"
    shutil.copytree(tight.folder, folder)
    path = folder / name
    value = json.loads(path.read_text())
    change(value)
    path.write_bytes(canon.pretty_bytes(value))
    return folder


def _results(value: Any) -> dict[str, dict[str, Any]]:
    return {row["original"]: row for row in value["results"]}


def _no_change(registry: Registry, before: set[Path]) -> bool:
    return set(registry.root.joinpath("registry").rglob("*.json")) == before


@pytest.mark.parametrize(
    ("defect", "message", "code"),
    [
        ("a verdict that its records do not give", "claims agrees (ratio", 1),
        ("the original run named as its own rerun", "the rerun it names is the original run itself", 1),
        ("the rerun of another implementation", "has another implementationDigest than the original", 1),
        ("a record whose bytes were changed", "its manifest key says", 3),
        ("held-out shapes from a secret the job chose", "did not give: whoever ran the job chose them", 1),
    ],
)
def test_a_tampered_folder_is_refused_and_nothing_is_written(
    cli: RunCli, origin: Origin, tight: Reruns, tmp_path: Path, defect: str, message: str, code: int
) -> None:
    edited, paced, tuned = (origin.runs[name] for name in ("edited", "paced", "tuned"))

    def change(value: Any) -> None:
        if defect.startswith("a record"):
            key = next(key for key, record in value.items() if record["kind"] == "BenchmarkRun")
            value[key]["spec"]["timing"]["latencyNs"]["median"] //= 2
            return
        rows = _results(value)
        if defect.startswith("a verdict"):
            rows[edited]["verdict"] = "agrees"
        elif defect.startswith("the original"):
            rows[paced]["rerun"] = paced
        elif defect.startswith("held-out"):  # issue 32: the request gave the secret; another one draws other shapes
            assert rows[paced]["heldOut"]["secret"], rows[paced]
            rows[paced]["heldOut"]["secret"] = "ab" * 16
        else:
            rows[paced]["rerun"] = rows[tuned]["rerun"]

    name = "records.json" if defect.startswith("a record") else "reruns.json"
    folder = _tampered(tight, tmp_path, name, change)
    registry = clone(origin.root, tmp_path / "registry")
    before = set(registry.root.joinpath("registry").rglob("*.json"))
    result = cli("attest", "rerun", folder, "--key", origin.key("verifier"), "--registry", registry.root)
    assert result.exit_code == code, result.output
    assert message in result.stderr
    assert _no_change(registry, before)


def test_a_rerun_signed_at_once_with_sign(cli: RunCli, origin: Origin, tmp_path: Path) -> None:
    registry = clone(origin.root, tmp_path / "registry")
    paced = origin.runs["paced"]
    result = cli("rerun", paced, "--sign", origin.key("verifier"), "--registry", registry.root, "--json")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    assert row["verdict"] == "agrees"
    assert registry.has_record(row["rerun"])
    commit(registry.root, "Verifier rerun")
    report = cli("verify", paced, "--registry", registry.root, "--json")
    assert report.exit_code == 0, report.output
    assert json.loads(report.stdout)["level"] == "verified"

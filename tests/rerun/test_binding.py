"""``kictl attest rerun`` signs only reruns made for its own request: forged, re-dated, reused-secret,
future-dated and not-asked-for results folders are refused with the reason, and nothing is written.

Each attack edits a copy of the shared ``tight`` folder (a real ``kictl rerun --request`` session) the
way a hostile GPU job or a hand-written artifact would, re-digesting every record it changes so that
only the binding can catch it.
"""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kictl import canon
from kictl.records import record_from_value
from kictl.store.registry import Registry
from tests.conftest import RunCli
from tests.rerun.conftest import Origin, Reruns, clone, commit

pytestmark = pytest.mark.slow  # uses the shared rerun session of conftest.py

Edit = Callable[[dict[str, Any], dict[str, Any], Origin], None]


@pytest.fixture(scope="module")
def refusing(origin: Origin, tmp_path_factory: pytest.TempPathFactory) -> Registry:
    """One copy of the origin for every refused attack: a refusal writes nothing (each test checks it)."""
    return clone(origin.root, tmp_path_factory.mktemp("refusing") / "registry")


def _rerun_record(results: dict[str, Any], records: dict[str, Any], original: str) -> tuple[str, dict[str, Any]]:
    row = next(row for row in results["results"] if row["original"] == original)
    key = f"BenchmarkRun/{canon.digest_hex(row['rerun'])}"
    return key, records[key]


def _redigest(results: dict[str, Any], records: dict[str, Any], original: str, change: Callable[[Any], None]) -> None:
    """Change the rerun record of ``original`` and make every digest that names it right again."""
    key, raw = _rerun_record(results, records, original)
    del records[key]
    change(raw)
    record = record_from_value(raw)
    records[f"BenchmarkRun/{canon.digest_hex(record.digest)}"] = raw
    for row in results["results"]:
        if row["original"] == original:
            row["rerun"] = record.digest


def _attack(tight: Reruns, tmp_path: Path, edit: Edit, origin: Origin) -> Path:
    folder = tmp_path / "attacked"
    shutil.copytree(tight.folder, folder)
    results = json.loads((folder / "reruns.json").read_text())
    records = json.loads((folder / "records.json").read_text())
    edit(results, records, origin)
    (folder / "reruns.json").write_bytes(canon.pretty_bytes(results))
    (folder / "records.json").write_bytes(canon.pretty_bytes(records))
    return folder


def _forged(salt: str | None) -> Edit:
    """The issue's attack: the original's own bytes as the "rerun", observed later, verdict agrees."""

    def edit(results: dict[str, Any], records: dict[str, Any], origin: Origin) -> None:
        original = Registry(origin.root).load(origin.runs["edited"])
        raw = json.loads(json.dumps(original.raw))
        raw["spec"]["observedAt"] = results["createdAt"]
        raw["metadata"]["name"] = "a-rerun-written-by-hand"
        forged = record_from_value(raw)
        records[f"BenchmarkRun/{canon.digest_hex(forged.digest)}"] = raw
        for row in results["results"]:
            if row["original"] == original.digest:
                row.update(rerun=forged.digest, verdict="agrees", ratio=1.0, rerunNs=row["originalNs"])
                row["status"] = "passed"
                if salt is None:
                    row.pop("seedSalt", None)
                else:
                    row["seedSalt"] = salt

    return edit


def _observed(stamp: Callable[[dict[str, Any]], str]) -> Edit:
    def edit(results: dict[str, Any], records: dict[str, Any], origin: Origin) -> None:
        def change(raw: Any) -> None:
            raw["spec"]["observedAt"] = stamp(results)

        _redigest(results, records, origin.runs["paced"], change)

    return edit


def _not_asked(results: dict[str, Any], records: dict[str, Any], origin: Origin) -> None:
    row = dict(results["results"][0])
    row.update(original=origin.runs["gemm_torch"], verdict="inconclusive", reason="not asked for")
    row.pop("rerun", None)
    row.pop("ratio", None)
    results["results"].append(row)


def _status(results: dict[str, Any], records: dict[str, Any], origin: Origin) -> None:
    for row in results["results"]:
        if row["original"] == origin.runs["paced"]:
            row["status"] = "reward_hack"


def _twice(results: dict[str, Any], records: dict[str, Any], origin: Origin) -> None:
    results["results"].append(dict(results["results"][0]))


def _widened(results: dict[str, Any], records: dict[str, Any], origin: Origin) -> None:
    results["request"]["notAfter"] = "2098-01-01T00:00:00.000Z"


def _unbound(results: dict[str, Any], records: dict[str, Any], origin: Origin) -> None:
    del results["request"]


def _first_salt_zero(results: dict[str, Any], records: dict[str, Any], origin: Origin) -> None:
    for row in results["results"]:
        row["seedSalt"] = "0" * 32


@pytest.mark.parametrize(
    ("attack", "edit", "message"),
    [
        ("forged: the original's bytes, a zero salt", _forged("0" * 32), "its seed salt is zero"),
        ("forged: the original's bytes, no salt", _forged(None), "states no seed salt"),
        ("a zero salt on honest records", _first_salt_zero, "its seed salt is zero"),
        (
            "re-dated before the request",
            _observed(lambda results: "2020-01-01T00:00:00.000Z"),
            "outside the job's window",
        ),
        ("future-dated", _observed(lambda results: "2099-01-01T00:00:00.000Z"), "is in the future"),
        ("a result for a run not asked for", _not_asked, "did not ask for it"),
        ("a hand-written status", _status, "it states status reward_hack"),
        ("a request whose window was widened", _widened, "not the one the rerun request"),
        ("one run's result twice", _twice, "more than one result for it"),
        ("no request at all", _unbound, "the results name no rerun request"),
    ],
)
def test_attest_rerun_refuses_results_not_made_for_its_request(
    cli: RunCli,
    origin: Origin,
    tight: Reruns,
    refusing: Registry,
    tmp_path: Path,
    attack: str,
    edit: Edit,
    message: str,
) -> None:
    folder = _attack(tight, tmp_path, edit, origin)
    registry = refusing
    before = set(registry.root.joinpath("registry").rglob("*.json"))
    result = cli(
        "attest", "rerun", folder, "--key", origin.key("verifier"), "--require-verifier", "--registry", registry.root
    )
    assert result.exit_code == 1, (attack, result.output)
    assert message in result.stderr, (attack, result.stderr)
    assert set(registry.root.joinpath("registry").rglob("*.json")) == before


def test_the_forged_rerun_with_the_request_salt_is_caught_by_its_reused_secret(
    cli: RunCli, origin: Origin, tight: Reruns, refusing: Registry, tmp_path: Path
) -> None:
    salt = next(row["seedSalt"] for row in tight.verdicts.values())
    folder = _attack(tight, tmp_path, _forged(salt), origin)
    registry = refusing
    result = cli("attest", "rerun", folder, "--key", origin.key("verifier"), "--registry", registry.root)
    assert result.exit_code == 1, result.output
    assert "reuses the original run's inputSecret" in result.stderr


def test_a_request_is_signed_once_and_every_file_written_is_reported(
    cli: RunCli, origin: Origin, tight: Reruns, tmp_path: Path
) -> None:
    registry = clone(origin.root, tmp_path / "registry")
    (registry.root / "registry" / ".gitignore").write_text("*\n")  # a PR's .gitignore hides nothing from --written
    before = {path for path in registry.root.joinpath("registry").rglob("*") if path.is_file()}
    written = tmp_path / "written.txt"
    first = cli(
        "attest", "rerun", tight.folder, "--key", origin.key("verifier"), "--registry", registry.root,
        "--written", written,
    )  # fmt: skip
    assert first.exit_code == 0, first.output
    after = {path for path in registry.root.joinpath("registry").rglob("*") if path.is_file()}
    assert sorted(written.read_text().splitlines()) == sorted(registry.relative(path) for path in after - before)
    assert len(after - before) >= 4  # attestations and the reruns' records
    (registry.root / "registry" / ".gitignore").unlink()
    commit(registry.root, "Verifier reruns")
    again = cli("attest", "rerun", tight.folder, "--key", origin.key("verifier"), "--registry", registry.root)
    assert again.exit_code == 1, again.output
    assert "was signed before" in again.stderr
    statements = [
        json.loads(base64.b64decode(json.loads(path.read_bytes())["payload"]))
        for path in registry.attestations_dir.rglob("*.dsse.json")
    ]
    nonces = {s["predicate"].get("nonce") for s in statements if s["predicateType"].endswith("/rerun/v1")}
    assert nonces == {json.loads((tight.folder / "reruns.json").read_text())["request"]["nonce"]}

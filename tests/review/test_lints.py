"""One PR branch per lint: `kictl review` reports exactly that lint, exits 1, and its Markdown renders."""

from __future__ import annotations

import json
from pathlib import Path

from kictl import canon, trust
from tests import factories
from tests.conftest import RunCli
from tests.review.conftest import GEMM, Pr, envelope, record_path, run_review


def _only(reviewed_codes: list[str], code: str) -> None:
    assert reviewed_codes, "no lint reported"
    assert set(reviewed_codes) == {code}, reviewed_codes


def test_clean_pr_passes_with_nothing_to_say(cli: RunCli, pr: Pr) -> None:
    run = pr.base.run_like(median_ns=45_000)  # slower than torch_matmul's 40.0 µs on main: no rank change
    pr.add_record(run)
    pr.add_envelope(run, envelope(run))
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 0, reviewed.json_result.output
    assert reviewed.lint_codes == []
    assert reviewed.hint_codes == []
    assert reviewed.document["added"] == {"records": {"BenchmarkRun": 1}, "blobs": 0, "attestations": 1}
    assert reviewed.document["notChecked"] == []
    assert reviewed.document["leaderboards"] == []
    assert reviewed.markdown.startswith("### kictl review passes: 0 lints, 0 hints in 2 changed files\n")


def test_code_only_pr_passes_and_says_so(cli: RunCli, pr: Pr) -> None:
    pr.write("kictl/new_module.py", b"print('hello')\n")
    pr.write("README.md", b"# changed\n")
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 0, reviewed.json_result.output
    assert reviewed.document["codeOnly"] is True
    assert reviewed.lint_codes == []
    assert "code-only PR" in reviewed.markdown


def test_path_outside_registry_and_definitions(cli: RunCli, pr: Pr) -> None:
    run = pr.base.run_like(median_ns=45_000)
    pr.add_record(run)
    pr.add_envelope(run, envelope(run))
    pr.write("scripts/fetch.sh", b"curl example.org\n")
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 1
    _only(reviewed.lint_codes, "path-not-allowed")
    assert [lint["path"] for lint in reviewed.document["lints"]] == ["scripts/fetch.sh"]


def test_path_inside_registry_but_off_its_layout(cli: RunCli, pr: Pr) -> None:
    pr.write("registry/notes.txt", b"notes\n")
    pr.write(f"{GEMM}/README.md", b"about gemm\n")
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 1
    _only(reviewed.lint_codes, "path-not-allowed")
    assert sorted(lint["path"] for lint in reviewed.document["lints"]) == [f"{GEMM}/README.md", "registry/notes.txt"]


def test_edited_published_record(cli: RunCli, pr: Pr) -> None:
    raw = json.loads(json.dumps(pr.base.implementation))
    raw["metadata"]["title"] = "a new title keeps the digest but edits the file"
    pr.write(record_path(pr.base.implementation), canon.pretty_bytes(raw))
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 1
    _only(reviewed.lint_codes, "published-changed")
    assert reviewed.document["lints"][0]["message"].startswith("edits a published record")


def test_deleted_record_blob_and_attestation(cli: RunCli, pr: Pr) -> None:
    blob_hex = canon.sha256_hex(pr.base.blob)
    removed = [
        record_path(pr.base.protocol),
        f"registry/blobs/{blob_hex[:2]}/{blob_hex}",
        *[p.relative_to(pr.root).as_posix() for p in (pr.root / "registry" / "attestations").rglob("*.dsse.json")],
    ]
    for path in removed:
        pr.remove(path)
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 1
    _only(reviewed.lint_codes, "published-changed")
    assert sorted(lint["path"] for lint in reviewed.document["lints"]) == sorted(removed)
    assert all(lint["message"].startswith("deletes a published") for lint in reviewed.document["lints"])


def test_edited_blob(cli: RunCli, pr: Pr) -> None:
    blob_hex = canon.sha256_hex(pr.base.blob)
    pr.write(f"registry/blobs/{blob_hex[:2]}/{blob_hex}", b"other bytes\n")
    pr.commit()
    reviewed = run_review(cli, pr)
    _only(reviewed.lint_codes, "published-changed")


def test_file_name_not_its_digest(cli: RunCli, pr: Pr) -> None:
    run = pr.base.run_like(median_ns=30_000)
    other = pr.base.run_like(median_ns=31_000)
    pr.write(record_path(other), canon.pretty_bytes(run))
    pr.add_envelope(run, envelope(run))
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 1
    _only(reviewed.lint_codes, "bad-name-or-form")
    assert "file name is not the record's digest" in reviewed.document["lints"][0]["message"]


def test_bytes_not_in_normal_form(cli: RunCli, pr: Pr) -> None:
    run = pr.base.run_like(median_ns=30_000)
    pr.write(record_path(run), json.dumps(run).encode())
    pr.add_envelope(run, envelope(run))
    pr.commit()
    reviewed = run_review(cli, pr)
    _only(reviewed.lint_codes, "bad-name-or-form")
    assert "normal form" in reviewed.document["lints"][0]["message"]


def test_blob_and_envelope_named_wrongly(cli: RunCli, pr: Pr) -> None:
    pr.write("registry/blobs/ab/ab" + "0" * 62, b"bytes that hash elsewhere\n")
    value = envelope(pr.base.run)
    hex_digest = canon.digest_hex(canon.record_digest(pr.base.run))
    pr.write(f"registry/attestations/{hex_digest[:2]}/{hex_digest}/{'1' * 64}.dsse.json", canon.pretty_bytes(value))
    pr.commit()
    reviewed = run_review(cli, pr)
    _only(reviewed.lint_codes, "bad-name-or-form")
    assert len(reviewed.lint_codes) == 2


def test_schema_error(cli: RunCli, pr: Pr) -> None:
    run = pr.base.run_like(median_ns=30_000)
    run["spec"]["timing"]["latencyNs"]["avg"] = 5
    pr.add_record(run)
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 1
    _only(reviewed.lint_codes, "schema")
    assert reviewed.document["lints"][0]["message"] == "$.spec.timing.latencyNs.avg: unknown member"


def test_schema_error_in_policy_and_definition_folder(cli: RunCli, pr: Pr) -> None:
    policy = json.loads((pr.root / "registry" / "policy.json").read_text())
    policy["staleAfterDays"] = "a year"
    pr.write("registry/policy.json", canon.pretty_bytes(policy))
    pr.write(f"{GEMM}/definition.json", b'{"metadata": {"name": "gemm_n4096_k4096"}, "spec": ')
    pr.commit()
    reviewed = run_review(cli, pr)
    _only(reviewed.lint_codes, "schema")
    assert sorted(lint["path"] for lint in reviewed.document["lints"]) == [GEMM, "registry/policy.json"]


def test_dangling_reference(cli: RunCli, pr: Pr) -> None:
    run = pr.base.run_like(median_ns=30_000)
    run["spec"]["environmentDigest"] = canon.record_digest(factories.environment("B200"))
    pr.add_record(run)
    pr.add_envelope(run, envelope(run))
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 1
    _only(reviewed.lint_codes, "dangling-reference")
    assert reviewed.document["lints"][0]["message"].startswith("$.spec.environmentDigest: no record sha256:")


def test_reference_to_a_record_the_pr_adds_is_not_dangling(cli: RunCli, pr: Pr) -> None:
    environment = factories.environment("B200")
    run = pr.base.run_like(median_ns=30_000)
    run["spec"]["environmentDigest"] = canon.record_digest(environment)
    pr.add_record(run)
    pr.add_envelope(run, envelope(run))
    pr.add_record(environment)
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 0, reviewed.json_result.output


def test_dangling_attestation_and_blob(cli: RunCli, pr: Pr) -> None:
    ghost = pr.base.run_like(median_ns=99_999)  # never filed
    pr.add_envelope(ghost, envelope(ghost))
    workload = json.loads(json.dumps(pr.base.workloads["m128"]))
    workload["metadata"]["name"] = "m128-blob"
    workload["spec"]["inputs"]["A"] = {"type": "blob", "digest": "sha256:" + "e" * 64, "key": "A"}
    pr.add_record(workload)
    pr.commit()
    reviewed = run_review(cli, pr)
    _only(reviewed.lint_codes, "dangling-reference")
    messages = sorted(lint["message"] for lint in reviewed.document["lints"])
    assert messages[0].startswith("$.spec.inputs.A.digest: no blob sha256:eeee")
    assert messages[1].startswith("attests sha256:")
    assert "neither base nor head has" in messages[1]


def test_definition_changed_in_place(cli: RunCli, pr: Pr) -> None:
    reference = pr.root / GEMM / "reference.py"
    reference.write_text(reference.read_text() + "\n# accumulate in float64 from now on\n")
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 1
    _only(reviewed.lint_codes, "definition-in-place")
    (lint,) = reviewed.document["lints"]
    assert lint["path"] == GEMM
    # the Definition and its six workloads (their definitionDigest changes) are new records
    assert lint["message"].startswith("changed in place: it compiles Definition gemm_n4096_k4096 to sha256:")
    assert " and 6 Workloads (m1, m7, m32, m128, m512, ...) to records this PR does not add; " in lint["message"]
    assert lint["message"].endswith(f"the old Definition {canon.record_digest(pr.base.definition)} stays published")


def test_workload_suite_changed_in_place(cli: RunCli, pr: Pr) -> None:
    suite = pr.root / GEMM / "workloads.jsonl"
    suite.write_text(suite.read_text().replace('"seed": 31', '"seed": 33'))
    pr.commit()
    reviewed = run_review(cli, pr)
    _only(reviewed.lint_codes, "definition-in-place")
    (lint,) = reviewed.document["lints"]
    assert lint["message"].startswith("changed in place: it compiles 1 Workload (m128) to records this PR does not add")
    assert "stays published" not in lint["message"]


def test_new_definition_folder_not_compiled(cli: RunCli, pr: Pr) -> None:
    source = pr.root / GEMM
    target = pr.root / "definitions" / "gemm" / "gemm_n2000_k4096"  # a name the catalogue does not hold
    target.mkdir()
    text = (source / "definition.json").read_text().replace("gemm_n4096_k4096", "gemm_n2000_k4096")
    (target / "definition.json").write_text(
        text.replace('"value": 4096\n      },\n      "K"', '"value": 2000\n      },\n      "K"')
    )
    (target / "reference.py").write_text((source / "reference.py").read_text().replace("N = 4096", "N = 2000"))
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 1
    _only(reviewed.lint_codes, "definition-not-compiled")
    assert len(reviewed.lint_codes) == 1


def test_run_below_its_floor(cli: RunCli, pr: Pr) -> None:
    # m128 on an H200 moves 35.7 MB: 7.4 µs at 4.8 TB/s is the floor; 1 µs is impossible
    run = pr.base.run_like(median_ns=1_000)
    pr.add_record(run)
    pr.add_envelope(run, envelope(run))
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 1
    _only(reviewed.lint_codes, "below-floor")
    message = reviewed.document["lints"][0]["message"]
    assert message.startswith("median 1.00 µs is below the physical floor 7.")
    assert "of workload m128 on H200 (bandwidth-bound)" in message


def test_run_on_a_gpu_without_datasheet_is_refused_not_waved_through(cli: RunCli, pr: Pr) -> None:
    environment = factories.environment("MysteryGPU-9000")
    run = pr.base.run_like(median_ns=1_000)
    run["spec"]["environmentDigest"] = canon.record_digest(environment)
    pr.add_record(environment)
    pr.add_record(run)
    pr.add_envelope(run, envelope(run))
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 1, reviewed.json_result.output  # no floor is no free pass (issue 29)
    _only(reviewed.lint_codes, "unknown-gpu")
    assert "'MysteryGPU-9000', which has no datasheet figures" in reviewed.document["lints"][0]["message"]


def test_file_name_with_a_newline_is_not_read(cli: RunCli, pr: Pr) -> None:
    run = pr.base.run_like(median_ns=30_000)
    good = record_path(run)
    pr.write(good[: -len(".json")] + "\nregistry/policy.json", canon.pretty_bytes(run))
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 1
    _only(reviewed.lint_codes, "path-not-allowed")
    assert reviewed.document["lints"][0]["message"] == "a file name with control characters"
    assert reviewed.document["added"]["records"] == {}


def test_terminal_escapes_from_a_record_are_not_printed(cli: RunCli, pr: Pr) -> None:
    environment = factories.environment("H200")
    environment["spec"]["hardware"]["product"] = "Mystery\x1b[2J GPU"
    run = pr.base.run_like(median_ns=30_000)
    run["spec"]["environmentDigest"] = canon.record_digest(environment)
    pr.add_record(environment)
    pr.add_record(run)
    pr.add_envelope(run, envelope(run))
    pr.commit()
    result = cli("review", "--registry", pr.root, "--base", "main")
    assert result.exit_code == 1, result.output  # a product is printable ASCII: a schema lint
    assert "\x1b" not in result.stdout + result.stderr
    assert "schema" in result.stdout


def test_submodule_in_place_of_a_record(cli: RunCli, pr: Pr) -> None:
    path = record_path(pr.base.run_like(median_ns=30_000))
    pr.repo.git.update_index("--add", "--cacheinfo", f"160000,{pr.repo.head.commit.hexsha},{path}")
    pr.repo.index.update()
    pr.repo.git.commit("-q", "-m", "a gitlink where a record belongs")
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 1
    _only(reviewed.lint_codes, "path-not-allowed")
    assert reviewed.document["lints"][0] == {
        "code": "path-not-allowed",
        "message": "not a regular file: git mode 160000 (a gitlink, a submodule); data files are mode 100644",
        "path": path,
    }


def test_a_run_judged_looser_than_its_definitions_precision_contract_is_linted(cli: RunCli, pr: Pr) -> None:
    definition = factories.definition("gemm_tiny_contract")
    definition["spec"]["tolerance"] = {"atol": 1e-3, "rtol": 1e-3, "requiredMatchedRatio": 1.0}
    definition_digest = canon.record_digest(definition)
    workload = factories.workload(definition_digest, m=4096)
    implementation = factories.implementation(definition_digest, name="tiny_matmul")
    loose = factories.protocol()  # atol and rtol 0.01, no matched ratio: hand-written, as kictl bench would refuse
    kept = factories.protocol()
    kept["metadata"]["name"] = "kictl-contract"
    kept["spec"]["correctness"].update({"atol": 1e-3, "rtol": 1e-4, "requiredMatchedRatio": 1.0})
    for raw in (definition, workload, implementation, loose, kept):
        pr.add_record(raw)
    runs = {}
    for name, protocol in (("loose", loose), ("kept", kept)):
        run = factories.run(
            definition_digest=definition_digest,
            workload_digest=canon.record_digest(workload),
            implementation_digest=canon.record_digest(implementation),
            protocol_digest=canon.record_digest(protocol),
            environment_digest=canon.record_digest(pr.base.environment),
            median_ns=900_000 if name == "loose" else 950_000,
        )
        runs[name] = pr.add_record(run)
        pr.add_envelope(run, envelope(run))
    pr.commit()
    reviewed = run_review(cli, pr)
    found = [lint for lint in reviewed.document["lints"] if lint["code"] == "looser-than-contract"]
    assert [lint["path"] for lint in found] == [runs["loose"]], reviewed.document["lints"]
    assert "atol 0.01 > 0.001" in found[0]["message"]
    assert "rtol 0.01 > 0.001" in found[0]["message"]
    assert "matched ratio unstated < 1" in found[0]["message"]
    assert reviewed.exit_code == 1


def test_a_private_key_in_a_pr(cli: RunCli, pr: Pr, tmp_path: Path) -> None:
    """A submitter pastes their signing key into a definition's reference: the registry would publish it forever."""
    trust.generate_keypair(tmp_path / "k" / "mine.key", owner="me")
    key = (tmp_path / "k" / "mine.key").read_text()
    reference = pr.root / GEMM / "reference.py"
    pr.write(f"{GEMM}/reference.py", (reference.read_text() + f'\nKEY = """{key}"""\n').encode())
    pr.commit()
    reviewed = run_review(cli, pr)
    assert reviewed.exit_code == 1
    assert "private-key" in reviewed.lint_codes
    [lint] = [lint for lint in reviewed.document["lints"] if lint["code"] == "private-key"]
    assert lint["path"] == f"{GEMM}/reference.py"
    assert lint["message"].startswith("a PEM PRIVATE KEY block at line ")

"""``kictl site build`` never lets one page silently replace another: two pages or files with one path
fail the build, naming both (issue 29: ``RMSNORM_H4096`` took over ``d/rmsnorm_h4096/``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kictl.errors import CheckFailed
from kictl.records import record_from_value
from kictl.scaffold import create_registry
from kictl.site.build import Page, check_paths, claim_files
from kictl.store.registry import Registry
from tests.conftest import RunCli
from tests.trust.conftest import build_records


def _page(path: str) -> Page:
    return Page(path, "fingerprint", lambda: {})


def test_two_pages_with_one_path_fail_naming_both() -> None:
    check_paths([_page("d/scale_h8/index.html"), _page("gpu/h200/index.html")])
    with pytest.raises(CheckFailed, match="written twice") as raised:
        check_paths([_page("d/scale_h8/index.html"), _page("d/SCALE_H8/index.html")])
    assert "d/scale_h8/index.html and d/SCALE_H8/index.html" in "\n".join(raised.value.details)


def test_two_pages_writing_one_file_fail() -> None:
    owners: dict[str, str] = {}
    claim_files(owners, "d/a/index.html", ["d/a/index.html", "d/a/index.json"])
    claim_files(owners, "d/a/index.html", ["d/a/index.html"])  # the same page again is no clash
    with pytest.raises(CheckFailed, match="written by two pages"):
        claim_files(owners, "r/x/index.html", ["d/A/index.json"])


def test_a_definition_whose_name_folds_onto_another_fails_the_build(cli: RunCli, tmp_path: Path) -> None:
    root = tmp_path / "registry"
    create_registry(root)
    registry = Registry(root)
    records = build_records()
    raw = json.loads(json.dumps(records.definition.raw))
    raw["metadata"]["name"] = raw["spec"]["name"] = "SCALE_H8"  # slugs to the page of scale_h8
    registry.add([*records.all(), record_from_value(raw)])
    out = tmp_path / "site"
    result = cli("site", "build", out, "--registry", root)
    assert result.exit_code == 1, result.output
    assert "would be written twice" in result.stderr
    assert not (out / "d").exists()  # nothing written before the check

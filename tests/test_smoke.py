"""The bundled registry validates and lists its definitions through the CLI."""

from __future__ import annotations

import json

from kictl.store import Registry
from tests.conftest import RunCli


def test_bundled_registry_validates(cli: RunCli, bundled_registry: Registry) -> None:
    result = cli("validate", "--registry", bundled_registry.root, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["ok"] is True
    assert report["counts"]["Definition"] == 5


def test_definitions_list(cli: RunCli, bundled_registry: Registry) -> None:
    result = cli("definitions", "list", "--registry", bundled_registry.root, "--json")
    assert result.exit_code == 0, result.output
    names = {row["name"] for row in json.loads(result.stdout)}
    assert "gqa_paged_prefill_causal_h24_kv4_d128_ps1" in names

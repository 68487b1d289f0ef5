"""Every string a record brings to the terminal is made harmless (``kictl.terminal``), in every output path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kictl.records import record_from_value
from kictl.scaffold import create_registry
from kictl.store.registry import Registry
from kictl.terminal import json_safe, terminal_safe
from tests.conftest import RunCli
from tests.trust.conftest import build_records

HOSTILE = "fine\x1b[2J\x1b]0;pwned\x07\r\u202eevil\u2066x\u2069\x9b31m\x7f\x00end"
RAW = ("\x1b", "\x07", "\r", "\u202e", "\u2066", "\u2069", "\x9b", "\x7f", "\x00")


@pytest.mark.parametrize("char", RAW)
def test_every_unsafe_character_is_shown_escaped(char: str) -> None:
    shown = terminal_safe(f"a{char}b")
    assert char not in shown
    assert shown.startswith("a\\")
    assert shown.endswith("b")


def test_tab_newline_and_ordinary_unicode_stay() -> None:
    assert terminal_safe("a\tb\nc µs × é") == "a\tb\nc µs × é"


def test_json_stays_json_and_reads_back_the_same_string() -> None:
    document = json.dumps({"title": HOSTILE}, ensure_ascii=False)
    safe = json_safe(document)
    assert not any(char in safe for char in RAW)
    assert json.loads(safe) == {"title": HOSTILE}


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One registry for the module: every reader only reads it."""
    root = tmp_path_factory.mktemp("hostile") / "registry"
    create_registry(root)
    records = build_records()
    raw = json.loads(json.dumps(records.run.raw))
    raw["metadata"]["title"] = HOSTILE  # metadata is free text and not covered by the digest
    run = record_from_value(raw)
    Registry(root).add([*records.all()[:-1], run])
    return root, run.digest


@pytest.mark.parametrize(
    "args",
    [["show"], ["show", "--json"], ["show", "--raw"], ["verify"], ["verify", "--json"], ["cite"]],
    ids=lambda args: " ".join(args),
)
def test_no_reader_prints_a_records_control_characters(
    cli: RunCli, hostile_run: tuple[Path, str], args: list[str]
) -> None:
    root, digest = hostile_run
    result = cli(*args[:1], digest, *args[1:], "--registry", root)
    printed = result.stdout + result.stderr
    assert not any(char in printed for char in RAW), (args, printed)
    if "--json" in args:
        json.loads(result.stdout)  # still one valid JSON document


def test_an_error_naming_a_hostile_reference_is_escaped(cli: RunCli, hostile_run: tuple[Path, str]) -> None:
    root, _ = hostile_run
    result = cli("show", "no\x1b[31msuch\u202e", "--registry", root)
    assert result.exit_code == 3, result.output
    assert "\x1b" not in result.stderr
    assert "\u202e" not in result.stderr

"""docs/advisories.md stays true: its example is a valid advisory and every member of the schema is documented."""

from __future__ import annotations

import json
import re

from pydantic import BaseModel

from kictl.advisories.document import Advisory, Affects, Fixed, VersionRange, parse_advisory
from tests.conftest import REPO_ROOT

DOC = (REPO_ROOT / "docs" / "advisories.md").read_text()


def _wire_names(model: type[BaseModel]) -> set[str]:
    return {info.alias or name for name, info in model.model_fields.items()}


def test_the_example_is_a_valid_advisory() -> None:
    block = re.findall(r"```json\n(\{\n  \"apiVersion\".*?)```", DOC, flags=re.S)[0]
    advisory = parse_advisory(json.loads(block), source="docs/advisories.md")
    assert advisory.id == "KI-2026-0001"


def test_every_member_is_documented() -> None:
    table = DOC.split("| member | meaning |", 1)[1].split("\n\n", 1)[0]
    documented = set(re.findall(r"`([A-Za-z.]+)`", table))
    wanted = _wire_names(Advisory) | {f"affects.{name}" for name in _wire_names(Affects)}
    wanted |= {f"fixed.{name}" for name in _wire_names(Fixed)}
    wanted -= {"affects", "fixed"}
    assert wanted <= documented, sorted(wanted - documented)
    assert _wire_names(VersionRange) <= set(re.findall(r"`\{(\w+), (\w+)\}`", table)[0])

"""Legal shape ranges kictl states for the catalogue's published definitions, joined by digest (issue 42).

A held-out rerun draws shapes from the legal values of a definition's variable axes (``kictl.rerun.heldout``,
docs/rerun.md), which a definition states in its ``constraints``.  The catalogue's definitions are FlashInfer
Trace's, byte for byte: they state relations between axes but no ranges, so no held-out shape could be drawn for
them.  Stating ranges in their records would change their digests, and published records are never modified: a new
Definition version would need its whole workload suite again, a second copy of the catalogue's 1,728 records.

So kictl states them itself, as a family module states the relations its structure implies
(``Family.relations``) and the judge the family's outputs need (``kictl.families.judges.contract``): this module's
``catalogue_ranges.json`` holds, for each definition the catalogue imported, its digest and the constraints
``kictl.families.legal.range_constraints`` derives from the definition and its catalogue workloads (the range
each free axis spans over them, from the family's least legal value, and the family's relations).  The held-out
draw joins them to a definition by digest (``stated_ranges``): a definition of another digest (an edited copy,
another version) gets none, and nothing in the registry (a workload added by a pull request) widens or narrows
them.  ``render_ranges`` makes the file again from a checkout's catalogue (``definitions/``), and a test holds the
shipped file to it.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from kictl.definitions import catalogue_names, compile_folder, definition_folders, read_catalogue
from kictl.errors import RecordError
from kictl.families.legal import range_constraints
from kictl.records import DefinitionSpec, WorkloadSpec

RANGES_FILE = Path(__file__).with_name("catalogue_ranges.json")
RULE = (
    "kictl.families.legal.range_constraints(definition, axes of its catalogue workloads): each free axis ranges "
    "over what the workloads span, from the family's least legal value; then the family's relations"
)


@functools.cache
def _statement() -> dict[str, tuple[str, ...]]:
    try:
        document = json.loads(RANGES_FILE.read_bytes())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:  # kictl's own file: broken means a broken install
        raise RecordError(f"{RANGES_FILE.name}: cannot be read: {exc}") from exc
    stated: dict[str, tuple[str, ...]] = {}
    for digest, entry in document.get("definitions", {}).items():
        constraints = entry.get("constraints") if isinstance(entry, dict) else None
        if not isinstance(constraints, list) or not all(isinstance(text, str) for text in constraints):
            raise RecordError(f"{RANGES_FILE.name}: $.definitions.{digest}.constraints: expected a list of strings")
        stated[digest] = tuple(constraints)
    return stated


def stated_ranges(digest: str) -> tuple[str, ...]:
    """The constraints kictl states for the Definition of ``digest`` (none for a definition not in the catalogue).

    Raises ``RecordError`` when kictl's own statement cannot be read.
    """
    return _statement().get(digest, ())


def catalogue_ranges(root: Path) -> dict[str, Any]:
    """The statement for the catalogue of the checkout at ``root``: every imported definition's folder compiled as
    ``kictl definitions compile`` compiles it, with the constraints its workloads give it.  Raises
    ``RecordError`` when a folder does not compile."""

    manifest = read_catalogue(root) or {}
    names = catalogue_names(root)
    entries: dict[str, Any] = {}
    for folder in definition_folders(root):
        if folder.name not in names:
            continue
        compiled = compile_folder(folder, root)
        spec = compiled.definition.model.spec
        assert isinstance(spec, DefinitionSpec)
        observed = []
        for workload in compiled.workloads:
            workload_spec = workload.model.spec
            assert isinstance(workload_spec, WorkloadSpec)
            observed.append(dict(workload_spec.axes))
        stated = list(spec.constraints or ())
        constraints = [text for text in range_constraints(spec, observed) if text not in stated]
        if constraints:
            entries[compiled.definition.digest] = {"name": spec.name, "constraints": list(dict.fromkeys(constraints))}
    return {
        "source": manifest.get("source"),
        "commit": manifest.get("commit"),
        "rule": RULE,
        "definitions": dict(sorted(entries.items(), key=lambda item: (item[1]["name"], item[0]))),
    }


def render_ranges(root: Path) -> bytes:
    """``catalogue_ranges(root)`` as the bytes of ``catalogue_ranges.json``."""
    return (json.dumps(catalogue_ranges(root), indent=2, ensure_ascii=True) + "\n").encode()


def write_ranges(root: Path, path: Path = RANGES_FILE) -> None:
    """Write ``render_ranges(root)`` to ``path`` (a temporary file, then a rename)."""
    data = render_ranges(root)
    scratch = path.with_name(f".{path.name}.tmp")
    scratch.write_bytes(data)
    scratch.replace(path)
    _statement.cache_clear()


__all__ = ["RANGES_FILE", "RULE", "catalogue_ranges", "render_ranges", "stated_ranges", "write_ranges"]

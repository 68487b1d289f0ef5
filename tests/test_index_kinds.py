"""The index's tables are tied to the record kinds (issue 44: extension points that say themselves).

A new record kind is added to ``kictl.layout.KINDS`` (which ``kictl.records``
re-exports and its discriminated union validates); the index must then give it
a table (``_TABLES``), its columns (``_COLUMNS``) and a row extractor
(``parsing._row_values``).  These tests fail at the first of those a new kind
lacks, instead of a ``KeyError`` in the first registry that holds one.
"""

from __future__ import annotations

import sqlite3
import typing
from pathlib import Path

from kictl import records
from kictl.index._common import _COLUMNS, _TABLES, INDEX_FILE
from kictl.index.parsing import _row_values
from kictl.index.query import QueryIndex
from kictl.scaffold import create_registry
from kictl.store.registry import Registry
from tests.trust.conftest import build_records


def test_every_record_kind_has_an_index_table_and_no_table_lacks_a_kind() -> None:
    assert tuple(_TABLES) == records.KINDS  # same kinds, same order (listings walk them in this order)
    union = typing.get_args(records.AnyRecord)
    kinds_of_union = tuple(typing.get_args(model.model_fields["kind"].annotation)[0] for model in union)
    assert kinds_of_union == records.KINDS
    assert set(_COLUMNS) == set(_TABLES.values())
    assert len(set(_TABLES.values())) == len(_TABLES)  # one table a kind


def test_each_kinds_row_has_its_tables_columns() -> None:
    made = build_records().all()
    assert sorted(record.kind for record in made) == sorted(records.KINDS)  # one record of every kind
    for record in made:
        assert len(_row_values(record.model)) == len(_COLUMNS[_TABLES[record.kind]]), record.kind


def test_an_index_of_every_kind_holds_each_in_its_table(tmp_path: Path) -> None:
    root = tmp_path / "registry"
    create_registry(root)
    registry = Registry(root)
    made = build_records().all()
    registry.add(made)
    with QueryIndex.open(registry):
        pass
    with sqlite3.connect(registry.kictl_dir / INDEX_FILE) as conn:
        for record in made:
            rows = conn.execute(f"SELECT digest FROM {_TABLES[record.kind]}").fetchall()
            assert (record.digest,) in rows, record.kind

"""The query index: a SQLite digest of the registry's records under ``.kictl/`` (docs/records.md).

Leaderboards, floors, diffs and histories ask questions across many records
("every passed run of this definition, with its GPU and protocol family").
Reading and validating every record file for each question is slow once a
registry holds 100,000 runs, so the facts ranking needs are kept in
``.kictl/index.sqlite`` (the standard library's ``sqlite3``).  The index is
derived data: never committed (``.gitignore`` has ``.kictl/``), rebuilt from
the records whenever it cannot be trusted.

What the index mirrors.  Every file under ``registry/records/`` has one row
(a valid record in the table of its kind, anything else in ``problems``),
with two flags: ``committed`` (the file is in the tree of the commit the
index was last brought to, ``meta.commit``) and ``present`` (the file is in
the working tree).  Queries read present rows, so they see the working tree
(records added but not yet committed included); a snapshot at another
revision starts from the committed rows.

How it stays current without rebuilding.
* When HEAD differs from ``meta.commit``, the files that changed between the
  two commits (``git diff --name-status``, ``GitHistory.changed_files``) are
  applied: added files are parsed (from the working tree when there, else from
  git), deleted ones lose their ``committed`` flag; then ``meta.commit`` moves.
* Files that are not committed are found through the shard folders
  (``records/<kind>/<xx>/``): the index keeps each folder's modification time
  as of the moment its listing last matched the index, and lists again only
  the folders whose time changed.  A time within two seconds of the scan is
  not trusted (a file added in the same clock tick would not change it), the
  same "racy" rule git applies to its own index.
* An index of another schema, one whose commit git no longer knows, or a
  file SQLite cannot read is ignored and rebuilt; where ``.kictl/`` cannot be
  written the index is built in memory for the one command.

The index trusts a record file's name as its digest and does not check the
normal form: ``kictl validate`` and ``kictl review`` do (validate.py).  It
does validate each record against its schema, and a file that fails is kept
as a problem, never as a fact.

The package, by concern; import each name from its module (issue 44: a reader follows an import to the
module that defines the name)::

    _common      schema, tables, file names, settings
    facts        the rows the index returns
    parsing      record files to rows, fast
    query        ``QueryIndex``: opening and querying
    maintenance  keeping the index current with git and the working tree
    secret       this machine's secret, which seals derived files written here (kept answers, a site's manifest)
"""

from __future__ import annotations

from kictl.index._common import INDEX_FILE, RACY_SECONDS, SCHEMA_VERSION

__all__ = ["INDEX_FILE", "RACY_SECONDS", "SCHEMA_VERSION"]

"""The registry on disk and in git (docs/records.md); the only importer of gitpython.

Its paths come from ``kictl.layout`` (the one place that names them); this
module joins them onto a checkout and reads and writes the files.

Writes are atomic (a temporary file in the same folder, then a rename) and
idempotent: writing bytes a path already holds is a no-op, and a published
path is never overwritten with different bytes.  A batch of writes that fails
part-way removes what it created, so the registry is left as it was.

``Registry.git`` reads history through gitpython: the revisions, the files a
change touched, a file's bytes at a revision and the commit that first added
each file (the signing time of attestations, the history of records).

The package, by concern; import each name from its module (issue 44: the re-exports below go once no
module reads them)::

    files     finding the root; atomic, idempotent, all-or-nothing writes
    registry  ``Registry``: paths, reading and storing records and blobs
    git       ``GitHistory``: history through gitpython
    inputs    JSON files and record manifests given on the command line
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# The layout's names, long imported from here by the bench, importers and rerun: kictl.layout holds them.
from kictl.layout import (
    ATTESTATIONS_DIR,
    BLOBS_DIR,
    DEFINITIONS_DIR,
    POLICY_FILE,
    RECORDS_DIR,
    REGISTRY_DIR,
    ROOT_FILE,
    TRUST_DIR,
)
from kictl.lazy import lazy_attributes
from kictl.store._common import ENV_VAR

if TYPE_CHECKING:
    from kictl.store.files import (
        STALE_TEMPORARY_S,
        Transaction,
        find_root,
        is_temporary_name,
        read_file,
        sweep_temporaries,
        write_atomic,
        write_immutable,
        writer_lock,
    )
    from kictl.store.git import Change, CommitInfo, GitHistory, current_commit, init_repository
    from kictl.store.inputs import parse_json_file, read_record_inputs
    from kictl.store.registry import AddResult, Registry

#: Transitional (issue 44): each name still read through the package and its submodule, imported on first
#: use.  Modules of kictl outside kictl.store, kictl.index and the CLI still read them; once each imports the
#: submodule instead, this table, ``__getattr__`` and ``kictl.lazy`` go.
_SUBMODULES = {
    "files": (
        "STALE_TEMPORARY_S", "Transaction", "find_root", "is_temporary_name", "read_file", "sweep_temporaries",
        "write_atomic", "write_immutable", "writer_lock",
    ),
    "git": ("Change", "CommitInfo", "GitHistory", "current_commit", "init_repository"),
    "inputs": ("parse_json_file", "read_record_inputs"),
    "registry": ("AddResult", "Registry"),
}  # fmt: skip
_LAZY = {name: f"kictl.store.{module}" for module, names in _SUBMODULES.items() for name in names}


__getattr__ = lazy_attributes(globals(), _LAZY)


__all__ = [
    "ATTESTATIONS_DIR",
    "BLOBS_DIR",
    "DEFINITIONS_DIR",
    "ENV_VAR",
    "POLICY_FILE",
    "RECORDS_DIR",
    "REGISTRY_DIR",
    "ROOT_FILE",
    "STALE_TEMPORARY_S",
    "TRUST_DIR",
    "AddResult",
    "Change",
    "CommitInfo",
    "GitHistory",
    "Registry",
    "Transaction",
    "current_commit",
    "find_root",
    "init_repository",
    "is_temporary_name",
    "parse_json_file",
    "read_file",
    "read_record_inputs",
    "sweep_temporaries",
    "write_atomic",
    "write_immutable",
    "writer_lock",
]

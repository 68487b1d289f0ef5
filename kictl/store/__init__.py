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

The package, by concern; import each name from its module (issue 44: a reader follows an import to the
module that defines the name)::

    files     finding the root; atomic, idempotent, all-or-nothing writes
    registry  ``Registry``: paths, reading and storing records and blobs
    git       ``GitHistory``: history through gitpython
    inputs    JSON files and record manifests given on the command line
"""

from __future__ import annotations

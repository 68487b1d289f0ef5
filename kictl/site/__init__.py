"""The index's pages: a static site made from the registry (DESIGN §2 and §11).

``build_site`` writes one page per definition, per comparison group, per
BenchmarkRun (at ``r/<digest>/``, the path of the permalink ``kictl cite``
prints), per implementation and per GPU, with the index page, one stylesheet,
SVG plots and, beside every page, its JSON: the same documents the CLI prints
with ``--json``.  Every number comes from the functions the CLI calls
(``kictl.rank``, ``kictl.trust``, ``kictl.index``); the pages only lay them out.

Rebuilding from the same registry state gives byte-identical files: the
build's "now" is the time of the registry's HEAD commit (or
``SOURCE_DATE_EPOCH``), never the clock.  ``incremental=True`` renders only
the pages whose inputs changed since the last build into the same folder,
judged by fingerprints of each page's inputs taken from the query index
(``build-inputs.json`` beside the pages keeps them).
"""

from kictl.site.build import BuildReport, build_site

__all__ = ["BuildReport", "build_site"]

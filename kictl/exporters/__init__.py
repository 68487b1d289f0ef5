"""Writing the index's records in other harnesses' formats (the inverse of ``kictl.importers``).

* ``selection``: which runs an export holds and why every other run is left
  out (``select_winners``), from the runs' standing (``kictl.standing``) and
  the leaderboard; every format starts from it.
* ``flashinfer_trace``: ``kictl export flashinfer-trace``, a FlashInfer Trace
  set of the verified winners on one GPU product, for FlashInfer-Bench's
  ``apply`` (DESIGN §15, issue 32).

A new format is a module here that takes ``select_winners``'s candidates and
renders them (and a command in ``kictl.cli.exporters``).
"""

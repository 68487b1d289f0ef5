"""Writing the index's records in other harnesses' formats (the inverse of ``kictl.importers``).

* ``flashinfer_trace``: ``kictl export flashinfer-trace``, a FlashInfer Trace
  set of the verified winners on one GPU product, for FlashInfer-Bench's
  ``apply`` (DESIGN §15, issue 32).
"""

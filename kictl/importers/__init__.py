"""Importers of other harnesses' result formats into registry records (DESIGN §9).

Each module reads one foreign format and turns it into the index's records,
saying what it could not import and why; ``flashinfer_bench`` reads the
FlashInfer Trace dataset (definitions, workloads, solutions, traces).
"""

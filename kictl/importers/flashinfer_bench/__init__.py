"""Importing a FlashInfer Trace dataset (flashinfer-bench) as registry records (issue 6, DESIGN §3).

A FlashInfer Trace dataset is a folder of JSON documents linked by name:

``definitions/**/*.json``
    one Definition each: axes, inputs, outputs, the reference ``run`` and the
    family under ``op_type`` (the 2025 shape names it ``type``).
``solutions/**/*.json``
    one Solution each: an implementation of a definition with its sources.
``workloads/**/*.jsonl`` and ``traces/**/*.jsonl``
    one Trace object a line: ``{definition, workload, solution, evaluation}``.
    A line without an evaluation (``null`` or ``{}``, with ``solution`` null or
    ``""``) only declares a workload; a line with one is a benchmark result.

Every definition becomes a Definition, every workload a Workload (named by
the source's ``uuid``, kept in ``spec.uuid`` too), every solution an
Implementation, every distinct evaluation environment an
ExecutionEnvironment, and every evaluated line a BenchmarkRun measured under
one BenchmarkProtocol that describes the harness.  The 2025 shape differs:
trace lines carry no workload ``uuid`` (they are matched to the workload lines
of the same definition by axes and inputs), evaluations name the GPU under
``environment.device`` and keep a ``log_file``, timestamps carry no zone
(read as UTC, and each run says so in ``statusDetail``), and traces name a
solution ``<definition>_<label>`` where its file says ``<label>_<definition>``.

Safetensors inputs are copied into ``registry/blobs/`` by digest when the
dataset holds the file; when it does not, the input keeps the source's
``path`` and tensor key with ``missing: true``, so workloads whose blobs
differ stay distinct, and the report lists the missing files.

The dataset is untrusted input, read defensively (``Limits``): a symlink
that leads outside the dataset is never followed (its file or folder is
reported and skipped), documents, lines and blobs have size caps, JSON deeper
than ``canon.MAX_DEPTH`` levels and numbers out of range are per-item errors,
and no item can stop the rest of the import.  A Definition whose name the
registry already gives to another Definition is refused (unless
``allow_redefinition``), because two records of one name make the name
ambiguous everywhere the CLI takes it.

Reading is separate from writing: ``read_dataset`` builds every record and
reports each item it had to skip as ``file:line: message``;
``import_flashinfer_bench`` then stores the records and blobs in one
transaction (or, with ``dry_run``, only says which ones are new).  Records are
built from the source alone, so importing a dataset twice adds nothing.

Format reference: the flashinfer-bench documentation of the FlashInfer Trace
schema (Definition, Workload, Solution, Trace) and its ``flashinfer_bench.data``
models.

Modules: ``model`` (the format's names, ``Limits`` and the results), ``values`` (reading a
source value), ``walker`` (files and lines, safely), ``documents`` (definitions, solutions,
workloads), ``traces`` (runs, environments, notes) and ``importer`` (the entry points).
Every public name is importable from here, as before the split.
"""

from kictl.importers.flashinfer_bench.importer import (
    import_flashinfer_bench,
    read_dataset,
    registry_definitions,
    sweep_stale_temporaries,
)
from kictl.importers.flashinfer_bench.model import (
    COMPARABILITY_FAMILY,
    COMPARATOR,
    CORRECTNESS_REFERENCE,
    DEFAULT_LIMITS,
    HARNESS_REPOSITORY,
    MAX_INTEGER_DIGITS,
    METRICS,
    OP_TYPE_FAMILIES,
    PRIMARY_STATISTIC,
    PROTOCOL_NAME,
    SOURCE,
    STALE_TEMPORARY_S,
    STATUSES,
    TIMER,
    Dataset,
    ImportReport,
    Limits,
    MissingBlob,
    Outcome,
    Skipped,
    family_for_op_type,
)

__all__ = [
    "COMPARABILITY_FAMILY",
    "COMPARATOR",
    "CORRECTNESS_REFERENCE",
    "DEFAULT_LIMITS",
    "HARNESS_REPOSITORY",
    "MAX_INTEGER_DIGITS",
    "METRICS",
    "OP_TYPE_FAMILIES",
    "PRIMARY_STATISTIC",
    "PROTOCOL_NAME",
    "SOURCE",
    "STALE_TEMPORARY_S",
    "STATUSES",
    "TIMER",
    "Dataset",
    "ImportReport",
    "Limits",
    "MissingBlob",
    "Outcome",
    "Skipped",
    "family_for_op_type",
    "import_flashinfer_bench",
    "read_dataset",
    "registry_definitions",
    "sweep_stale_temporaries",
]

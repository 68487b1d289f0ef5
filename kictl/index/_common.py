"""Constants shared by the modules of ``kictl.index``."""

from __future__ import annotations

INDEX_FILE = "index.sqlite"
#: Bump when the tables or what is extracted into them change: older indexes are then rebuilt.
SCHEMA_VERSION = "3"  # 2: a CPU environment's product is "CPU: <model>"; 3: latencies derived from samples
#: A shard folder modified less than this many seconds before a scan is listed again next time.
RACY_SECONDS = 2.0

_TABLES = {
    "Definition": "definitions",
    "Workload": "workloads",
    "Implementation": "implementations",
    "BenchmarkProtocol": "protocols",
    "ExecutionEnvironment": "environments",
    "BenchmarkRun": "runs",
}
_COMMON = (
    "digest TEXT PRIMARY KEY, path TEXT UNIQUE NOT NULL, shard TEXT NOT NULL, "
    "committed INTEGER NOT NULL, present INTEGER NOT NULL, name TEXT NOT NULL"
)
_COLUMNS: dict[str, tuple[str, ...]] = {
    "definitions": ("title", "family", "reference_sha256"),
    "workloads": ("definition", "axes"),
    "implementations": ("definition", "project", "runtime", "availability", "revision", "entry_sha256"),
    "protocols": ("comparability", "statistic", "harness", "timer"),
    "environments": ("product", "hardware_product"),
    "runs": (
        "definition",
        "workload",
        "implementation",
        "protocol",
        "environment",
        "status",
        "statistic",
        "latency_ns",
        "observed_at",
        "noise_ns",
        "noise_source",
        "native_reference_ns",
        "samples",
    ),
}
_SCHEMA = [
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)",
    *(f"CREATE TABLE {table} ({_COMMON}, {', '.join(columns)})" for table, columns in _COLUMNS.items()),
    "CREATE TABLE problems (path TEXT PRIMARY KEY, shard TEXT NOT NULL, committed INTEGER NOT NULL, "
    "present INTEGER NOT NULL, message TEXT NOT NULL)",
    "CREATE TABLE shards (shard TEXT PRIMARY KEY, mtime_ns INTEGER NOT NULL)",
    "CREATE TABLE work (workload TEXT PRIMARY KEY, bytes INTEGER NOT NULL, flops INTEGER, "
    "compute_dtype TEXT NOT NULL, synthesized TEXT NOT NULL, notes TEXT NOT NULL)",
]
#: Secondary indexes, created after a full build has inserted its rows (sorting once is faster).
_INDEXES = [
    *(f"CREATE INDEX {table}_shard ON {table} (shard)" for table in _COLUMNS),
    "CREATE INDEX problems_shard ON problems (shard)",
    "CREATE INDEX definitions_name ON definitions (name)",
    "CREATE INDEX workloads_definition ON workloads (definition)",
    "CREATE INDEX implementations_name ON implementations (name)",
    "CREATE INDEX runs_workload ON runs (workload)",
    "CREATE INDEX runs_definition ON runs (definition)",
    "CREATE INDEX runs_implementation ON runs (implementation)",
]

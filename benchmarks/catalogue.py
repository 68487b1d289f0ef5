#!/usr/bin/env python
"""Measure the catalogue on the lent GPU: every definition's implementations, latency and energy (issue 43).

Claim (README "A tour of the bundled registry"; RESULTS.md "The catalogue on the H100"): each definition with
implementations has a leaderboard on the GPU product this ran on, holding the reference, the FlashInfer baseline
where one exists and a torch alternative, every run measured by ``kictl bench`` (sandboxed, CUPTI device time)
and signed afterwards, off the GPU machine. Machine and command: the H100, ``bash benchmarks/device.sh
catalogue.py --skip-measured --budget 470``.

Run from the repository root on the GPU machine, in one call (``bash benchmarks/device.sh catalogue.py ...``)::

    python benchmarks/catalogue.py --out "$OUT/catalogue" [--definition NAME ...] [--definitions-from FILE]
        [--family FAMILY ...] [--skip-measured [PRODUCT]] [--skip NAME ...] [--workloads N] [--budget SECONDS]
        [--plan] [--energy]

Which implementations (docs/importing.md, "Implementations of a whole family"): a definition with a folder of
its own, ``implementations/<definition>/`` (the five bundled ones), is measured with that folder's
implementations, as before; every other definition with the family implementations that
``implementations/families/serves.json`` maps to it (its family and its input names), the definition's
reference first.  A definition that only its reference serves (``leftOut`` in serves.json: a FlashInfer kernel
built for Blackwell only, or no torch alternative written yet) is measured last, its reference alone, so that its
leaderboard on the GPU product holds real data; the plan says why only the reference.

Which workloads: all of a suite of at most eight; from a larger suite eight, by this rule: a workload's size is
the product of its variable axes but the allocation-only ones (``ALLOCATION_AXES``: the page pool, the state
cache, the cos/sin table); workloads of the same size-relevant axes count once; eight target sizes are spaced
evenly in log from the smallest to the largest, and each takes the nearest workload (in log) not yet taken: the
smallest, the largest and six spanning the range between.  ``--workloads N`` takes N by the same rule.  A causal
prefill workload whose axes give fewer KV tokens than queries is never chosen (``keyless_queries``), and the plan
says how many were left out.

Order and budget: the bundled definitions first; with ``--skip-measured``, then the first definition of each family
none of whose definitions the registry holds a run of on that product (every new family tried once before any
goes deeper); then the families in ``FAMILY_ORDER``, each by name.  Before
each definition the script estimates its time (``RUN_SECONDS`` a run, ``DEFINITION_SECONDS`` for its processes,
``BUILD_SECONDS`` for a FlashInfer module not yet built in this call, ``CACHED_SECONDS`` for one the carried
cache holds (``BUILT_KEYS``, written into the cache as each is built), ``WARM_SECONDS`` for one built already,
``JUDGED_SECONDS_PER_BYTE`` for each byte of the ``JUDGED_OUTPUTS`` outputs a run's judging reads) and
starts it only if it fits in what is left of ``--budget``.  A definition that takes longer than its estimate (a
host-bound reference) is stopped between workloads (``kictl bench --stop-after``), and one whose workload is still
running at the budget is interrupted (SIGTERM), so the workloads it measured keep their records; what does not fit,
and a definition stopped at the budget, is listed as left for a later call
(``left.txt``, which ``--definitions-from`` reads).
``--skip-measured [PRODUCT]`` (default ``H100 SXM``) leaves out every chosen workload on which the registry already
holds a kictl latency run of each implementation on that GPU product, and every implementation measured on all the
workloads left (a definition with none left is skipped);
``--skip NAME`` skips definitions by name; ``--plan`` prints the plan and stops (no GPU needed).
A chosen workload whose reference would take over ``MAX_WORKLOAD_SECONDS`` (``REFERENCE_CALLS`` calls, at the time a
call its largest measured workload on that product predicts, in proportion to size; for a definition not measured
yet, a sibling's: the same family and variable axes) is left out and listed: some references loop in Python and
take seconds a call (``gqa_paged_prefill_causal_h40_kv10_d128_ps1``: 13 s on ``b1_q512``), and one such workload
would spend a whole call.  The estimate counts the kept workloads' predicted reference calls too (stop 57:
``gqa_paged_prefill_causal_h6_kv1_d128_ps1``, never measured, was estimated at 126 s and took 348 s for 5 of 8).

What it does, in order, per definition:

1. FlashInfer's kernels are JIT-built outside the sandbox, once per module: a FlashInfer implementation runs
   unsandboxed on the definition's smallest chosen workload (one call, results thrown away) the first time its
   module key (``warm_key``) comes up, then the built modules are installed as FlashInfer AOT kernels, which a
   sandboxed worker loads without ninja (a private rebuild in every worker took 85 s on the H200: HISTORY,
   device call F).
2. ``kictl bench DEFINITION --impl reference --impl … --workload … --out DIR``, the real command line with its
   defaults; with ``--energy``, ``--measure energy`` for the attention, GEMM and MoE families of each
   implementation but the reference, on the workloads where it took at least 50 µs (shorter calls cannot be
   told apart by the 100 ms energy counter within a loop of seconds); ``--energy-processes 3`` measures the
   FlashInfer runs in three separate processes (the spread claim); ``--energy-from DIR`` chooses from the
   latency manifests of an earlier call.
3. Prints one row per run (definition, workload, implementation, status, primary statistic) and packs the
   manifests into ``records.tgz`` for the trip back, after every definition.

Nothing is signed here: the machine that runs submitted code holds no key.  Back on the development machine:
``kictl submit`` the manifests with the bench submitter key (docs/submitting.md), or ``kictl add`` then
``kictl sign``.  ``--smoke`` runs the same path on a CPU, without FlashInfer: the smallest workload of the
bundled RMSNorm definition and of ``fused_add_rmsnorm_h2048`` (a family-served one), ``--device cpu`` and few
calls.
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib.util
import json
import math
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FAMILIES_DIR = ROOT / "implementations" / "families"
ENERGY_FAMILIES = ("gqa-paged-attention", "gqa-ragged-attention", "mla-paged-attention", "gemm", "moe")
ENERGY_MIN_NS = 50_000
ENERGY_FAMILY = "kictl-nvml-energy"
#: the order of the families after the bundled definitions: attention and GEMM first (issue 43's energy boards)
FAMILY_ORDER = (
    "gqa-paged-attention",
    "gemm",
    "rmsnorm",
    "gqa-ragged-attention",
    "mla-ragged-attention",
    "mla-paged-attention",
    "sampling",
    "rope",
    "gdn",
    "mamba-ssu",
    "moe",
    "dsa-paged",
)
WORKLOADS_PER_DEFINITION = 8
#: variable axes that only size an allocation (the page pool, the state cache, the cos/sin table): not a size
ALLOCATION_AXES = frozenset({"num_pages", "max_num_pages", "state_cache_size", "pool_size", "max_seq_len"})
#: seconds, from the H100 call of 2026-12-06 (81 runs in 131 s after the builds: 1.6 s a run), with a margin
RUN_SECONDS = 1.8
DEFINITION_SECONDS = 8.0
BUILD_SECONDS = 75.0
WARM_SECONDS = 10.0
#: a module the carried FlashInfer cache already holds: loading it in the first run costs about this
CACHED_SECONDS = 25.0
#: the module keys built into the FlashInfer cache, kept in the cache itself (KICTL_SAVE_FI_CACHE carries it on)
BUILT_KEYS = Path.home() / ".cache" / "flashinfer" / "kictl-built-keys.json"
SMOKE = ("rmsnorm_h4096", "fused_add_rmsnorm_h2048")
SMOKE_OPTIONS = ("--device", "cpu", "--warmup", "1", "--iterations", "3", "--trials", "1", "--rounds", "1")
DEFAULT_PRODUCT = "H100 SXM"
#: ``kictl bench --stop-after``: a definition starts no workload later than this many seconds before the budget's
#: end, so that one running long (a host-bound reference) keeps the workloads it measured.  A workload that
#: outlasts this margin too is interrupted at the budget (SIGTERM: kictl writes the workloads it finished and exits
#: ``INTERRUPTED``); one that does not end within ``GRACE_S`` of that is killed (``KILLED``: nothing written)
STOP_MARGIN_S = 20.0
#: a workload makes about this many calls of the definition's reference: three correctness rounds, the warm-up (3
#: once the time budget is spent), the timed minimum and the audited calls' reference outputs (stop 55's
#: ``h5_kv1_ps64`` ``b1_q2048``: 150 s at 3.7 s a call, before the warm-up cap)
REFERENCE_CALLS = 30
#: seconds a byte of an output the parent judges costs (the reference's output for it, sent to the parent, and the
#: comparison): stop 58's H100 GEMMs spent 1.1 s on each audit of a 352 MB output, 2.2-2.4 ns a byte at 176 and
#: 352 MB, so that ``gemm_n34816_k5120`` took 161 s where the plan said 37
JUDGED_SECONDS_PER_BYTE = 2.5e-9
#: outputs judged per run: the three correctness rounds and about 20 audited timed calls (``audited`` in a record)
JUDGED_OUTPUTS = 23
#: a chosen workload whose reference is predicted to need longer than this (``REFERENCE_CALLS`` calls, at the
#: per-call time its measured runs on this product predict) is left for a call of its own: stop 56's call 4 spent
#: 223 s of a 225-s budget on one workload of ``gqa_paged_prefill_causal_h40_kv10_d128_ps1`` (13 s a call) and
#: measured nothing
MAX_WORKLOAD_SECONDS = 120.0
GRACE_S = 30.0
INTERRUPTED = 128 + signal.SIGTERM  # kictl bench's status after a SIGTERM, its finished workloads written
KILLED = -9  # the exit status this script gives a kictl it had to kill (kictl's own are 0 to 5, or INTERRUPTED)


@dataclass
class Definition:
    """One definition of the registry, with what this script would measure of it."""

    name: str
    family: str
    digest: str
    inputs: list[str]
    axes: dict[str, Any]
    workloads: list[tuple[str, dict[str, int]]] = field(default_factory=list)
    implementations: list[Path] = field(default_factory=list)
    chosen: list[str] = field(default_factory=list)
    bundled: bool = False
    reason: str = ""
    dropped: list[str] = field(default_factory=list)
    #: why only the reference serves it (measured last, its reference alone); empty when others do
    reference_only: str = ""
    #: chosen workload -> seconds a call of the reference is predicted to take there (``_leave_slow``), for
    #: ``estimate``: a host-bound reference, not the run count, sets a slow definition's time
    reference_calls: dict[str, float] = field(default_factory=dict)
    #: the definition's spec (``kictl.records.DefinitionSpec``), for its outputs' sizes (``output_bytes``)
    spec: Any = None


def _run_within(command: list[str], timeout: float | None) -> subprocess.CompletedProcess[str]:
    """``command`` run to its end; past ``timeout`` it gets SIGTERM (kictl bench then keeps the workloads it
    finished), and ``GRACE_S`` later it is killed (``KILLED``)."""
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
        return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
    except subprocess.TimeoutExpired:
        assert timeout is not None
    process.send_signal(signal.SIGTERM)
    try:
        stdout, stderr = process.communicate(timeout=GRACE_S)
        note = f"interrupted after {timeout:.0f} s (budget)"
        return subprocess.CompletedProcess(command, process.returncode, stdout, f"{stderr}\n{note}\n")
    except subprocess.TimeoutExpired:
        process.kill()
        _, stderr = process.communicate()
        return subprocess.CompletedProcess(
            command, KILLED, "", f"{stderr}\nkilled after {timeout + GRACE_S:.0f} s (budget)\n"
        )


def _kictl(*args: str, log: Path, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """kictl with ``args`` (``_run_within``), its command line, exit status and stderr appended to ``log``."""
    started = time.monotonic()
    done = _run_within([sys.executable, "-m", "kictl", *args], timeout)
    with log.open("a") as handle:
        handle.write(f"$ kictl {' '.join(args)}  # exit {done.returncode}, {time.monotonic() - started:.1f} s\n")
        handle.write(done.stderr)
    return done


def serves() -> dict[str, Any]:
    """``implementations/families/serves.json``: which family implementation serves which definition."""
    loaded: dict[str, Any] = json.loads((FAMILIES_DIR / "serves.json").read_text())
    return loaded


def family_implementations(family: str, inputs: list[str], table: dict[str, Any] | None = None) -> list[Path]:
    """The family implementations that serve a definition of ``family`` with these input names, reference first."""
    table = table or serves()
    found = []
    for relative, rule in table["serves"].items():
        if "*" not in rule["families"] and family not in rule["families"]:
            continue
        if "inputs" in rule and inputs not in rule["inputs"]:
            continue
        found.append(FAMILIES_DIR / relative)
    return sorted(found, key=lambda path: path.name != "reference")


def own_implementations(definition: str) -> list[Path]:
    """``implementations/<definition>/``'s implementations (the bundled definitions'), reference first."""
    folder = ROOT / "implementations" / definition
    if not folder.is_dir() or folder == FAMILIES_DIR:
        return []
    found = sorted(path for path in folder.iterdir() if (path / "implementation.json").is_file())
    return sorted(found, key=lambda path: path.name != "reference")  # the reference first, as kictl bench wants


def uses_flashinfer(implementation: Path) -> bool:
    spec = json.loads((implementation / "implementation.json").read_text())
    return any(name.startswith("flashinfer") for name in spec.get("dependencies", {}))


def workload_size(axes: dict[str, int]) -> int:
    """A workload's size for the choice: the product of its variable axes but those that only size an
    allocation (``ALLOCATION_AXES``: the page pool, the state cache, the cos/sin table), which no kernel reads
    whole."""
    return math.prod(value for name, value in axes.items() if name not in ALLOCATION_AXES)


def choose_workloads(workloads: list[tuple[str, dict[str, int]]], limit: int = WORKLOADS_PER_DEFINITION) -> list[str]:
    """Labels of the workloads to measure, smallest first: all of a suite of at most ``limit``; else ``limit``
    spanning its sizes on a log scale.

    Sizes are ``workload_size``; workloads of the same size-relevant axes count once (the first by label).  The
    targets are ``limit`` sizes spaced evenly in log between the smallest and the largest; each takes the
    workload nearest to it in log (ties: the smaller, then the label) among those not taken yet, so the
    smallest and the largest are always among them and a suite bunched at one end is still spanned.
    """
    ordered = sorted(workloads, key=lambda item: (workload_size(item[1]), item[0]))
    if len(ordered) <= limit:
        return [label for label, _ in ordered]
    distinct: list[tuple[str, int]] = []
    seen: set[tuple[tuple[str, int], ...]] = set()
    for label, axes in ordered:
        key = tuple(sorted((name, value) for name, value in axes.items() if name not in ALLOCATION_AXES))
        if key not in seen:
            seen.add(key)
            distinct.append((label, workload_size(axes)))
    if len(distinct) <= limit:
        return [label for label, _ in distinct]
    if limit <= 1:
        return [distinct[0][0]]
    low, high = math.log(max(distinct[0][1], 1)), math.log(max(distinct[-1][1], 1))
    left = list(range(len(distinct)))
    picked: list[int] = []
    for i in range(limit):
        target = low + (high - low) * i / (limit - 1)
        best = min(left, key=lambda k: (abs(math.log(max(distinct[k][1], 1)) - target), distinct[k][1], k))
        left.remove(best)
        picked.append(best)
    return [distinct[k][0] for k in sorted(picked)]


def warm_key(implementation: Path, definition: Definition, table: dict[str, Any] | None = None) -> tuple[Any, ...]:
    """What decides which FlashInfer module an implementation builds for a definition, as ``serves.json``'s
    ``warmBy`` states it for a family implementation: ``dims``, the definition's const axes named ``*dim*`` (head
    sizes); ``cudaCoreGroup``, whether the query group takes FlashInfer's CUDA-core decode kernel (1, 2, 3, 4, 6
    or 8 heads per KV head) or its tensor-core one.  Heads, page size, batch and lengths are runtime arguments of
    one module.  An implementation that states no ``warmBy`` (a bundled definition's own) is warmed for every
    definition."""
    table = table or serves()
    try:
        relative = implementation.resolve().relative_to(FAMILIES_DIR.resolve()).as_posix()
    except ValueError:
        relative = None
    rule = table["serves"].get(relative, {}) if relative else {}
    if "warmBy" not in rule:
        return (implementation.resolve(), definition.name)
    key: list[Any] = [implementation.resolve()]
    if "dims" in rule["warmBy"]:
        key.append(tuple(sorted((k, v) for k, v in definition.axes.items() if "dim" in k)))
    if "cudaCoreGroup" in rule["warmBy"]:
        heads = definition.axes.get("num_qo_heads"), definition.axes.get("num_kv_heads")
        if isinstance(heads[0], int) and isinstance(heads[1], int) and heads[1] > 0:
            key.append(heads[0] // heads[1] in (1, 2, 3, 4, 6, 8))
        else:
            key.append(definition.name)
    return tuple(key)


def load_definitions(registry_root: Path) -> list[Definition]:
    """Every Definition of the registry with its workloads (labels and axes), read in one pass."""
    from kictl.definitions import signature
    from kictl.records import DefinitionSpec
    from kictl.store.registry import Registry

    registry = Registry(registry_root)
    by_digest: dict[str, Definition] = {}
    for record in registry.iter_records(["Definition"]):
        spec = record.raw["spec"]
        axes = {name: axis.get("value") for name, axis in spec["axes"].items() if axis.get("type") == "const"}
        model = record.model.spec
        assert isinstance(model, DefinitionSpec)
        inputs = list(signature(model).inputs)  # the reference's run(...) order: the record's keys are sorted
        by_digest[record.digest] = Definition(record.name, spec["family"], record.digest, inputs, axes, spec=model)
    for workload in registry.iter_records(["Workload"]):
        owner = by_digest.get(workload.raw["spec"]["definitionDigest"])
        if owner is not None:
            owner.workloads.append((workload.name, dict(workload.raw["spec"].get("axes") or {})))
    return list(by_digest.values())


def order(definitions: list[Definition], unmeasured: Collection[str] = ()) -> list[Definition]:
    """The bundled definitions first; then the first definition (by name) of each family in ``unmeasured`` (none of
    its definitions measured on the GPU product yet: ``--skip-measured``), so that a call tries every new family's
    implementations on the GPU before it goes deeper into one; then ``FAMILY_ORDER`` (other families last), each by
    name; the definitions only their reference serves after all of them, in the same order."""
    firsts = {
        family: min((bool(item.reference_only), item.name) for item in definitions if item.family == family)[1]
        for family in {item.family for item in definitions} & set(unmeasured)
    }

    def rank(item: Definition) -> tuple[int, int, int, int, str]:
        family = FAMILY_ORDER.index(item.family) if item.family in FAMILY_ORDER else len(FAMILY_ORDER)
        first = 0 if firsts.get(item.family) == item.name else 1
        return (1 if item.reference_only else 0, 0 if item.bundled else 1, first, family, item.name)

    return sorted(definitions, key=rank)


def _latency_runs(registry: Any, product: str) -> Iterator[tuple[dict[str, Any], str]]:
    """(spec, workload name) of every kictl latency run the registry holds on ``product`` (energy runs,
    ``kictl-nvml-energy``, measure something else and do not count)."""
    environments = {
        record.digest
        for record in registry.iter_records(["ExecutionEnvironment"])
        if (record.raw["spec"].get("hardware") or {}).get("product") == product
    }
    protocols = {
        record.digest
        for record in registry.iter_records(["BenchmarkProtocol"])
        if (record.raw["spec"].get("harness") or {}).get("name") == "kictl"
        and (record.raw["spec"].get("comparability") or {}).get("family") != ENERGY_FAMILY
    }
    workloads = {record.digest: record.name for record in registry.iter_records(["Workload"])}
    for run in registry.iter_records(["BenchmarkRun"]):
        spec = run.raw["spec"]
        if spec.get("environmentDigest") in environments and spec.get("protocolDigest") in protocols:
            yield spec, workloads.get(spec["workloadDigest"], "")


def measured(registry_root: Path, product: str) -> set[tuple[str, str, str]]:
    """(definition digest, implementation digest, workload name) of every kictl latency run the registry holds on
    ``product``."""
    from kictl.store.registry import Registry

    runs = _latency_runs(Registry(registry_root), product)
    return {(spec["definitionDigest"], spec["implementationDigest"], workload) for spec, workload in runs}


def reference_seconds(registry_root: Path, product: str) -> dict[tuple[str, str], float]:
    """(definition digest, workload name) -> seconds a call of the definition's reference took on ``product``, from
    the kictl latency runs the registry holds (the slowest, where there are several)."""
    from kictl.store.registry import Registry

    registry = Registry(registry_root)
    references = {
        record.digest
        for record in registry.iter_records(["Implementation"])
        if record.raw["spec"].get("definitionReference") or record.name.split("_", 1)[0] == "reference"
    }
    seconds: dict[tuple[str, str], float] = {}
    for spec, workload in _latency_runs(registry, product):
        latency = ((spec.get("timing") or {}).get("latencyNs") or {}).get("median")
        if spec.get("implementationDigest") in references and isinstance(latency, int) and latency > 0:
            key = (spec["definitionDigest"], workload)
            seconds[key] = max(seconds.get(key, 0.0), latency / 1e9)
    return seconds


def _per_call(
    item: Definition, seconds: dict[tuple[str, str], float], siblings: Sequence[Definition]
) -> tuple[float, int, str]:
    """(seconds a call, at what size, said how) of ``item``'s reference: its own largest workload measured on this
    product, else a sibling's largest (same family, same variable axes: the same reference code at other head
    counts), the sibling's whose call is the slowest for its size."""
    sizes = dict(item.workloads)
    own = [(workload_size(sizes[label]), took, label) for (digest, label), took in seconds.items()
           if digest == item.digest and label in sizes]  # fmt: skip
    if own:
        size, took, label = max(own)
        return took, size, f"{took:.2f} s a call on {label}"
    best: tuple[float, int, str] | None = None
    for sibling in siblings:
        theirs = dict(sibling.workloads)
        known = [(max(workload_size(theirs[label]), 1), took, label) for (digest, label), took in seconds.items()
                 if digest == sibling.digest and label in theirs]  # fmt: skip
        if known:
            size, took, label = max(known)  # its largest: a small workload's fixed cost would not scale
            if best is None or took / size > best[0] / best[1]:
                best = (took, size, f"{took:.2f} s a call on {sibling.name}'s {label}")
    return best if best is not None else (0.0, 1, "")


def _leave_slow(item: Definition, seconds: dict[tuple[str, str], float], siblings: Sequence[Definition] = ()) -> None:
    """Leave out the chosen workloads whose reference would take longer than ``MAX_WORKLOAD_SECONDS``: its
    per-call time predicted from the largest workload measured on this product (or a sibling's, ``_per_call``), in
    proportion to the size (``workload_size``; most slow references loop over queries or pages in Python), times
    ``REFERENCE_CALLS``.  The kept workloads' predictions go into ``item.reference_calls`` for ``estimate``."""
    took, size, said = _per_call(item, seconds, siblings)
    if not said:
        return
    sizes = dict(item.workloads)
    predicted = {w: took * workload_size(sizes[w]) / max(size, 1) for w in item.chosen}
    slow = [w for w in item.chosen if predicted[w] * REFERENCE_CALLS > MAX_WORKLOAD_SECONDS]
    item.reference_calls = {w: predicted[w] for w in item.chosen if w not in slow}
    if slow:
        item.chosen = [w for w in item.chosen if w not in slow]
        item.dropped.append(
            f"{len(slow)} workload(s) whose reference would take over {MAX_WORKLOAD_SECONDS:.0f} s a workload "
            f"({said}, scaled by size: {', '.join(slow)})"
        )


def implementation_digest(implementation: Path, definition_digest: str, registry: Any) -> str:
    """The digest of the Implementation record ``kictl bench --impl implementation`` makes for the definition."""
    from kictl.bench.judge.implementation import load_implementation

    return load_implementation(str(implementation), registry.load(definition_digest), registry).record.digest


def needs(implementation: Path, table: dict[str, Any]) -> list[str]:
    """The Python modules ``serves.json`` says a family implementation needs beyond its package (``needs``)."""
    try:
        relative = implementation.resolve().relative_to(FAMILIES_DIR.resolve()).as_posix()
    except ValueError:
        return []
    return list(table["serves"].get(relative, {}).get("needs", []))


def _reason(item: Definition, reasons: dict[str, Any]) -> str:
    """The reason ``reasons`` gives ``item`` by a pattern of its name (fnmatch) or by its family; empty if none."""
    for pattern, reason in reasons.items():
        if fnmatch.fnmatchcase(item.name, pattern) or pattern == item.family:
            return str(reason)
    return ""


def not_judged_reason(item: Definition, table: dict[str, Any]) -> str:
    """Why kictl cannot judge ``item`` yet (``serves.json``'s ``notJudged``); empty where it can."""
    return _reason(item, table.get("notJudged", {}))


def left_out_reason(item: Definition, table: dict[str, Any]) -> str:
    """Why only the reference serves ``item``: ``serves.json``'s ``leftOut`` by name pattern, else by family."""
    return _reason(item, table.get("leftOut", {})) or "no implementation of its family but the reference"


def plan(
    definitions: list[Definition],
    *,
    wanted: list[str],
    families: list[str],
    skip: list[str],
    held: set[tuple[str, str, str]] | None,
    registry_root: Path,
    flashinfer: bool,
    limit: int = WORKLOADS_PER_DEFINITION,
    importable: Callable[[str], bool] | None = None,
    reference_times: dict[tuple[str, str], float] | None = None,
) -> tuple[list[Definition], list[Definition]]:
    """(definitions to measure, in order; definitions left out, each with its reason).

    An implementation whose ``serves.json`` entry ``needs`` a Python module that is not ``importable`` here
    (FlashInfer's GDN kernels on Hopper are CuTe DSL kernels: ``cutlass``, from nvidia-cutlass-dsl) is dropped,
    and the definition's ``dropped`` says so."""
    importable = importable or (lambda name: importlib.util.find_spec(name) is not None)
    from kictl.store.registry import Registry

    registry = Registry(registry_root)
    table = serves()
    chosen: list[Definition] = []
    left: list[Definition] = []
    #: (family, variable axes) of each definition: those that share it are siblings (``_leave_slow``)
    shape = {
        id(item): (item.family, frozenset(name for _, axes in item.workloads for name in axes)) for item in definitions
    }
    for item in definitions:
        if (wanted and item.name not in wanted) or (families and item.family not in families):
            continue
        own = own_implementations(item.name)
        item.bundled = bool(own)
        item.implementations = own or family_implementations(item.family, item.inputs, table)
        if not flashinfer:
            item.implementations = [path for path in item.implementations if not uses_flashinfer(path)]
        for path in list(item.implementations):
            missing = [name for name in needs(path, table) if not importable(name)]
            if missing:
                item.implementations.remove(path)
                item.dropped.append(f"{path.name} (needs the Python module {', '.join(missing)}, not importable here)")
        judged_not = not_judged_reason(item, table)
        if item.name in skip:
            item.reason = "skipped (--skip)"
        elif judged_not:
            item.reason = f"not judged yet: {judged_not}"
        elif not item.workloads:
            item.reason = "no workload"
        elif [path.name for path in item.implementations] == []:
            item.reason = "; ".join([left_out_reason(item, table), *(f"dropped {text}" for text in item.dropped)])
        elif [path.name for path in item.implementations] == ["reference"]:
            item.reference_only = left_out_reason(item, table)
        if item.reason:
            left.append(item)
            continue
        measurable = [(label, axes) for label, axes in item.workloads if not keyless_queries(item, axes)]
        if len(measurable) < len(item.workloads):
            item.dropped.append(
                f"{len(item.workloads) - len(measurable)} of {len(item.workloads)} workload(s) whose axes give fewer "
                "KV tokens than queries (some queries see no key: the reference writes NaN there, FlashInfer 0)"
            )
        if not measurable:
            item.reason = "every workload's axes give fewer KV tokens than queries"
            left.append(item)
            continue
        item.chosen = choose_workloads(measurable, WORKLOADS_PER_DEFINITION if item.bundled else limit)
        if held is not None:
            _leave_measured(item, held, registry)
            if not item.chosen:
                item.reason = "every implementation measured already (--skip-measured)"
                left.append(item)
                continue
        if reference_times:
            siblings = [other for other in definitions
                        if other is not item and shape[id(other)] == shape[id(item)]]  # fmt: skip
            _leave_slow(item, reference_times, siblings)
            if not item.chosen:
                item.reason = "; ".join(item.dropped)
                left.append(item)
                continue
        chosen.append(item)
    unmeasured: set[str] = set()
    if held is not None:
        measured_definitions = {digest for digest, _, _ in held}
        unmeasured = {item.family for item in definitions} - {
            item.family for item in definitions if item.digest in measured_definitions
        }
    return order(chosen, unmeasured), left


def _leave_measured(item: Definition, held: set[tuple[str, str, str]], registry: Any) -> None:
    """``--skip-measured``: the chosen workloads on which some implementation has no run yet, and the
    implementations that lack a run on one of them (the rest of a definition a budget stopped part-way)."""
    digests = {path: implementation_digest(path, item.digest, registry) for path in item.implementations}

    def missing(path: Path, label: str) -> bool:
        return (item.digest, digests[path], label) not in held

    item.chosen = [label for label in item.chosen if any(missing(path, label) for path in item.implementations)]
    item.implementations = [path for path in item.implementations if any(missing(path, label) for label in item.chosen)]


def keyless_queries(item: Definition, axes: dict[str, int]) -> bool:
    """Whether a causal paged prefill workload's axes leave some query without a key to attend: more queries
    (``total_q``) than KV tokens (``num_kv_indices`` pages of ``page_size``), so one sequence at least has fewer
    keys than queries.  FlashInfer Trace's captured suites hold such workloads (a prefix-only KV, as a serving
    stack's cascade attends the new tokens with a ragged kernel): there its references write NaN (a softmax over no
    key), where FlashInfer and kictl's torch alternative write 0, so no honest kernel can pass them (H100, 12-07:
    6 of `gqa_paged_prefill_causal_h32_kv4_d128_ps1`'s 8 chosen, benchmarks/RESULTS.md)."""
    page_size = item.axes.get("page_size")
    if "causal" not in item.name or not isinstance(page_size, int):
        return False
    queries, pages = axes.get("total_q"), axes.get("num_kv_indices")
    return isinstance(queries, int) and isinstance(pages, int) and queries > pages * page_size


def key_text(key: tuple[Any, ...]) -> str:
    """A module key as the same text on every machine (paths relative to the repository)."""
    parts = [part.relative_to(ROOT).as_posix() if isinstance(part, Path) and part.is_relative_to(ROOT) else part
             for part in key]  # fmt: skip
    return json.dumps(parts, default=str)


def built_keys() -> set[str]:
    """The module keys the FlashInfer cache on this machine says it holds (none where there is no cache)."""
    try:
        found = json.loads(BUILT_KEYS.read_text())
    except (OSError, ValueError):
        return set()
    return {text for text in found if isinstance(text, str)} if isinstance(found, list) else set()


def output_bytes(item: Definition, label: str) -> int:
    """The bytes of the definition's outputs on workload ``label`` (0 where its axes do not say)."""
    from kictl.errors import RecordError
    from kictl.families import full_axes, tensor_bytes

    axes = dict(item.workloads).get(label)
    if item.spec is None or axes is None:
        return 0
    try:
        full = full_axes(item.spec, axes)
        return sum(tensor_bytes(item.spec, name, full) for name in item.spec.outputs)
    except (RecordError, KeyError):
        return 0


def estimate(item: Definition, warmed: set[tuple[Any, ...]], cached: frozenset[str] = frozenset()) -> float:
    """Seconds this definition is expected to take, FlashInfer builds included (a module in the carried cache
    only loads: ``CACHED_SECONDS``), and the judging of each run's outputs (``JUDGED_OUTPUTS`` of each workload's
    ``output_bytes``): a large GEMM's 570 MB output, not its runs, sets its time."""
    seconds = DEFINITION_SECONDS + RUN_SECONDS * len(item.implementations) * len(item.chosen)
    judged = sum(output_bytes(item, label) for label in item.chosen)
    seconds += JUDGED_SECONDS_PER_BYTE * JUDGED_OUTPUTS * len(item.implementations) * judged
    if any(path.name == "reference" for path in item.implementations):
        seconds += REFERENCE_CALLS * sum(item.reference_calls.get(label, 0.0) for label in item.chosen)
    for implementation in item.implementations:
        if uses_flashinfer(implementation):
            key = warm_key(implementation, item)
            if key in warmed:
                seconds += WARM_SECONDS
            else:
                seconds += CACHED_SECONDS if key_text(key) in cached else BUILD_SECONDS
    return seconds


def _install_aot() -> int:
    """Copy FlashInfer's JIT-built modules to where it loads AOT kernels from (h200_setup.sh does this for a cache)."""
    try:
        import flashinfer
    except ImportError:
        return 0
    aot = Path(flashinfer.__file__).parent / "data" / "aot"
    count = 0
    for so in (Path.home() / ".cache" / "flashinfer").glob("*/*/cached_ops/*/*.so"):
        target = aot / so.parent.name
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy2(so, target / so.name)
        count += 1
    return count


def _stopped_line(stderr: str) -> str:
    """kictl's own line about the workloads ``--stop-after`` or an interrupt left."""
    return next(
        (
            line.removeprefix("warning: ")
            for line in stderr.splitlines()
            if "(--stop-after" in line or line.startswith("warning: interrupted after ")
        ),
        "",
    )


def _rows(manifest_dir: Path) -> list[dict[str, Any]]:
    rows = []
    for path in sorted(manifest_dir.glob("*.json")):
        manifest = json.loads(path.read_text())  # {"<kind>/<hex>": record}, as kictl bench --out writes it
        for record in manifest.values():
            if not isinstance(record, dict) or record.get("kind") != "BenchmarkRun":
                continue
            spec = record["spec"]
            timing = spec.get("timing") or {}
            statistic = timing.get("primaryStatistic", "median")
            value = (timing.get("latencyNs") or {}).get(statistic)
            energy = (spec.get("energy") or {}).get("joulesPerCall")
            rows.append(
                {
                    "name": record["metadata"]["name"],
                    "status": spec["status"],
                    "latencyNs": value,
                    "joulesPerCall": energy,
                }
            )
    return rows


def _pack(out: Path) -> None:
    """The manifests so far, in one file (a device call brings back few files, and a killed call keeps this one)."""
    with tarfile.open(out / "records.tgz.part", "w:gz") as tar:
        for kind in ("latency", "energy"):
            if (out / kind).is_dir():
                tar.add(out / kind, arcname=kind)
    (out / "records.tgz.part").replace(out / "records.tgz")


ENERGY_RUN_SECONDS = 7.0  # three loops of 1.5 s a workload, and the calls that set them up


def _names(path: Path | None) -> list[str]:
    """The definition names a file lists, one a line (``left.txt`` of an earlier call); blank lines skipped."""
    if path is None:
        return []
    names = [line.strip() for line in path.read_text().splitlines() if line.strip()]
    if not names:
        raise SystemExit(f"{path}: names no definition")
    return names


def _energy_jobs(item: Definition, source: Path, processes: int) -> list[tuple[int, Definition, Path, list[str]]]:
    """(process, definition, implementation, labels) of the energy runs the latency manifests in ``source`` pick."""
    picks: dict[str, set[str]] = {}
    for row in _rows(source):
        implementation, label = row["name"].split(".")[:2]
        if row["status"] == "passed" and (row["latencyNs"] or 0) >= ENERGY_MIN_NS:
            picks.setdefault(implementation.rsplit("_", 1)[0], set()).add(label)
    jobs = []
    for implementation in item.implementations:
        labels = sorted(picks.get(implementation.name, ()))
        if implementation.name == "reference" or not labels:
            continue  # the reference is measured for latency; its energy says little about a kernel
        repeats = processes if uses_flashinfer(implementation) else 1
        jobs.extend((process, item, implementation, labels) for process in range(1, repeats + 1))
    return jobs


def _warm(item: Definition, warmed: set[tuple[Any, ...]], out: Path, log: Path) -> str | None:
    """Build the FlashInfer modules this definition needs outside the sandbox, once per module key."""
    started = time.monotonic()
    built = 0
    for implementation in item.implementations:
        key = warm_key(implementation, item)
        if not uses_flashinfer(implementation) or key in warmed:
            continue
        _kictl(
            "bench", item.name, "--impl", str(implementation), "--workload", item.chosen[0], "--no-sandbox",
            "--warmup", "1", "--iterations", "1", "--trials", "1", "--rounds", "1",
            "--out", str(out / "warm"), log=log,
        )  # fmt: skip
        warmed.add(key)
        built += 1
        try:  # the cache now holds this key's modules: a later call that carries it only loads them
            BUILT_KEYS.write_text(json.dumps(sorted(built_keys() | {key_text(key)}), indent=0))
        except OSError:
            pass
    if not built:
        return None
    shutil.rmtree(out / "warm", ignore_errors=True)
    installed = _install_aot()
    return f"{item.name}: flashinfer: {installed} module(s) installed as AOT in {time.monotonic() - started:.0f} s"


def _check_names(parser: argparse.ArgumentParser, args: argparse.Namespace, definitions: list[Definition]) -> None:
    """A definition, family or GPU product the registry and the datasheet table do not know stops the script in one
    line (exit 2) before any GPU work: a misspelt ``--definition`` would otherwise plan nothing and spend a call."""
    from kictl.families.gpus import find_gpu
    from kictl.lookup import closest

    names = [item.name for item in definitions]
    families = sorted({item.family for item in definitions})
    for option, given, known in (("--definition", args.definition, names), ("--skip", args.skip, names),
                                 ("--family", args.family, families)):  # fmt: skip
        for name in given:
            if name not in known:
                near = closest(name, known)
                parser.error(
                    f"{option} {name}: no such {option[2:]}" + (f" (closest: {', '.join(near)})" if near else "")
                )
    if args.skip_measured:
        gpu = find_gpu(args.skip_measured)
        if gpu is None:
            parser.error(
                f"--skip-measured {args.skip_measured}: not a GPU product of the datasheet table "
                f"(e.g. {DEFAULT_PRODUCT})"
            )
        args.skip_measured = gpu.product  # the records' name of it ("h100 sxm" -> "H100 SXM", as kictl's index says)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--definition", action="append", default=[], help="only these definitions (repeatable)")
    parser.add_argument(
        "--definitions-from", type=Path, help="only the definitions this file names, one a line (a left.txt)"
    )
    parser.add_argument("--family", action="append", default=[], help="only these families (repeatable)")
    parser.add_argument("--skip", action="append", default=[], help="skip this definition (repeatable)")
    parser.add_argument(
        "--skip-measured",
        nargs="?",
        const=DEFAULT_PRODUCT,
        metavar="PRODUCT",
        help=f"leave out implementations the registry holds a kictl run of on this GPU product ({DEFAULT_PRODUCT})",
    )
    parser.add_argument("--plan", action="store_true", help="print what would be measured, and stop")
    parser.add_argument(
        "--workloads",
        type=int,
        default=WORKLOADS_PER_DEFINITION,
        help=f"workloads per definition from a larger suite, spread by size (default {WORKLOADS_PER_DEFINITION})",
    )
    parser.add_argument("--energy", action="store_true", help="also --measure energy (attention, GEMM, MoE)")
    parser.add_argument("--no-latency", action="store_true", help="skip the latency runs (energy only)")
    parser.add_argument(
        "--energy-from", type=Path, help="latency manifests (DIR/<definition>/) that choose energy runs"
    )
    parser.add_argument("--energy-processes", type=int, default=1, help="separate processes per FlashInfer run")
    parser.add_argument(
        "--budget",
        type=float,
        default=470.0,
        help="seconds: no definition or energy run is started that would end after",
    )
    parser.add_argument("--smoke", action="store_true", help="a CPU check of this script's path")
    parser.add_argument("--registry", type=Path, default=ROOT)
    args = parser.parse_args()
    definitions = load_definitions(args.registry)
    _check_names(parser, args, definitions)
    out: Path = args.out
    begun = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    log = out / "kictl.log"
    options = list(SMOKE_OPTIONS) if args.smoke else []
    held = measured(args.registry, args.skip_measured) if args.skip_measured else None
    chosen, left = plan(
        definitions,
        wanted=list(SMOKE) if args.smoke else [*args.definition, *_names(args.definitions_from)],
        families=args.family,
        skip=args.skip,
        held=held,
        registry_root=args.registry,
        flashinfer=not args.smoke,
        limit=max(args.workloads, 1),
        reference_times=None if args.smoke else reference_seconds(args.registry, args.skip_measured or DEFAULT_PRODUCT),
    )
    if args.smoke:
        for item in chosen:
            item.chosen = item.chosen[:1]
    summary: list[str] = [f"plan: {len(chosen)} definition(s) to measure, {len(left)} left out"]
    warmed: set[tuple[Any, ...]] = set()
    projected = 0.0
    for item in chosen:
        seconds = estimate(item, warmed)
        projected += seconds
        warmed.update(warm_key(path, item) for path in item.implementations if uses_flashinfer(path))
        summary.append(
            f"plan: {item.name} ({item.family}): {len(item.implementations)} implementation(s) "
            f"[{', '.join(path.name for path in item.implementations)}] x {len(item.chosen)} of "
            f"{len(item.workloads)} workload(s), estimated {seconds:.0f} s, {projected:.0f} s in all"
            + "".join(f"; dropped {text}" for text in item.dropped)
            + (f"; reference only: {item.reference_only}" if item.reference_only else "")
        )
    summary.extend(f"left out: {item.name} ({item.family}): {item.reason}" for item in left)
    print("\n".join(summary), flush=True)
    if args.plan:
        return 0
    warmed = set()
    cached = frozenset(built_keys())
    energy_jobs: list[tuple[int, Definition, Path, list[str]]] = []
    not_started: list[Definition] = []

    for item in chosen:
        remaining = args.budget - (time.monotonic() - begun)
        if not args.smoke and not args.no_latency and estimate(item, warmed, cached) > remaining:
            not_started.append(item)
            continue
        if not args.no_latency:
            if not args.smoke:  # with --no-latency the kernels come from a carried cache
                built = _warm(item, warmed, out, log)
                if built:
                    summary.append(built)
                    print(built, flush=True)
            impls = [arg for implementation in item.implementations for arg in ("--impl", str(implementation))]
            labels = [arg for label in item.chosen for arg in ("--workload", label)]
            started = time.monotonic()
            left_now = args.budget - (started - begun)
            stop = () if args.smoke else ("--stop-after", f"{max(left_now - STOP_MARGIN_S, 0.0):.0f}")
            done = _kictl(
                "bench", item.name, *impls, *labels, *options, *stop, "--out", str(out / "latency" / item.name),
                log=log, timeout=None if args.smoke else max(left_now + 30.0, 60.0),
            )  # fmt: skip
            summary.append(
                f"{item.name}: latency exit {done.returncode} in {time.monotonic() - started:.0f} s "
                f"({len(item.implementations)} x {len(item.chosen)} runs)"
            )
            print(summary[-1], flush=True)
            if done.returncode == KILLED:  # past the budget: its manifest was never written; a later call retries
                shutil.rmtree(out / "latency" / item.name, ignore_errors=True)
                not_started.append(item)
                continue
            stopped = _stopped_line(done.stderr)
            if stopped:  # stopped between workloads or interrupted inside one: what it finished is packed below
                not_started.append(item)
                summary.append(f"{item.name}: {stopped}")
                print(summary[-1], flush=True)
        if args.energy and item.family in ENERGY_FAMILIES:
            energy_jobs += _energy_jobs(item, (args.energy_from or out / "latency") / item.name, args.energy_processes)
        _pack(out)
    # every first energy process before any repeat, so that a budget cuts repeats, never a board
    for process, item, implementation, labels in sorted(energy_jobs, key=lambda job: job[0]):
        if time.monotonic() - begun + DEFINITION_SECONDS + ENERGY_RUN_SECONDS * len(labels) > args.budget:
            summary.append(f"{item.name}: {implementation.name} energy process {process} skipped (budget)")
            continue
        started = time.monotonic()
        done = _kictl(
            "bench", item.name, "--impl", str(implementation),
            *(arg for label in labels for arg in ("--workload", label)),
            "--measure", "energy", "--out", str(out / "energy" / f"p{process}-{item.name}"), log=log,
        )  # fmt: skip
        summary.append(
            f"{item.name}: {implementation.name} energy process {process} on {len(labels)} workload(s), "
            f"exit {done.returncode} in {time.monotonic() - started:.0f} s"
        )
        _pack(out)
        print(summary[-1], flush=True)

    # 3. the table, what is left, and the manifests packed for the trip back
    summary.extend(f"left for a later call (budget): {item.name}" for item in not_started)  # killed ones too
    (out / "left.txt").write_text("".join(f"{item.name}\n" for item in not_started))
    lines = ["run                                                                    status     median        J/call"]
    for kind in ("latency", "energy"):
        for folder in sorted((out / kind).glob("*")) if (out / kind).is_dir() else []:
            for row in _rows(folder):
                latency = f"{row['latencyNs'] / 1000:10.2f} µs" if row["latencyNs"] else "         -   "
                energy = f"{row['joulesPerCall']:.4g}" if row["joulesPerCall"] else "-"
                lines.append(f"{row['name'][:70]:70s} {row['status']:10s} {latency} {energy}")
    _pack(out)
    (out / "summary.txt").write_text("\n".join([*summary, *lines]) + "\n")
    print("\n".join([*(f"left for a later call (budget): {item.name}" for item in not_started), *lines]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

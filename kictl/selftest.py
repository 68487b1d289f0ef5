"""``kictl selftest``: the exploit corpus against the installed harness (DESIGN §13, docs/advisories.md).

The corpus is ``tests/assets/cheats/``: one Python file per entry (a cheat, a
defect or an honest implementation that must pass) and ``corpus.json``, the
machine-readable header of every entry: its class, what must happen to it in
each bench *session* (a definition, workloads, a device and options) —
``reward_hack`` naming one of the listed checks, another status with words its
detail must hold, or ``passed`` — and the advisories it demonstrates.

The corpus stays where the tests and the bench engineers keep it; a wheel of
kictl carries a copy as package data (``kictl/_corpus``, ``pyproject.toml``'s
``force-include``), and a source checkout reads the folder itself.  So an
installed kictl and CI run the same entries, and nothing is copied by hand.

``run_selftest`` runs each session whose device is here (the CUDA sessions
where a GPU is present) through ``kictl.bench.run_bench`` exactly as
``kictl bench`` would, and judges every entry.  Its result is written to the
machine's ``selftest.json`` beside the user's kictl config (and ``--out DIR``), bound to the harness's
identity (name, version, commit: what a BenchmarkProtocol records) and a
fingerprint of the installed package's files.  ``kictl attest rerun`` refuses to
sign results measured by a harness without a passing selftest on that device
kind, or one an open advisory names (``require_sound_harness``).  The record is
a guard of the verifier's own routine, not evidence: nothing in the registry
depends on it.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError

from kictl import canon
from kictl.advisories.document import protocol_matches
from kictl.advisories.published import has_advisories, load_advisories
from kictl.bench.judge.options import BenchOptions
from kictl.bench.judge.results import harness_identity
from kictl.bench.judge.session import run_bench
from kictl.errors import CheckFailed, EnvError, RecordError, RegistryError, UsageError
from kictl.records import STATUSES, WireModel, now_timestamp, validation_error
from kictl.store.files import read_file, write_atomic
from kictl.store.registry import Registry
from kictl.trust.anchor import config_file

CORPUS_FILE = "corpus.json"
RESULT_FILE = "selftest.json"


class Expectation(WireModel):
    """What must happen to an entry in one session."""

    status: str
    #: ``reward_hack``: the status detail names one of these checks
    checks: Annotated[tuple[str, ...], Field(min_length=1)] | None = None
    #: another failing status: its detail holds these words
    detail: str | None = None


class Entry(WireModel):
    exploit_class: str = Field(alias="class")
    expect: Annotated[dict[str, Expectation], Field(min_length=1)]
    advisories: tuple[str, ...] = ()


class SessionSpec(WireModel):
    definition: str
    workloads: Annotated[tuple[str, ...], Field(min_length=1)]
    device: Literal["cpu", "cuda"]
    options: dict[str, str | int | float] = Field(default_factory=dict)


class Corpus(WireModel):
    api_version: Literal["kernelindex.dev/v1alpha1"]
    kind: Literal["ExploitCorpus"]
    sessions: dict[str, SessionSpec]
    entries: dict[str, Entry]


@dataclass(frozen=True, slots=True)
class LoadedCorpus:
    folder: Path
    corpus: Corpus

    def source(self, entry: str) -> Path:
        return self.folder / f"{entry}.py"


def corpus_folder() -> Path:
    """Where the installed kictl's corpus is: ``kictl/_corpus`` in a wheel, else the source checkout's folder.

    Raises ``EnvError`` (exit 5) when neither exists (a wheel built without it).
    """
    package = Path(__file__).resolve().parent
    for folder in (package / "_corpus", package.parent / "tests" / "assets" / "cheats"):
        if (folder / CORPUS_FILE).is_file():
            return folder
    raise EnvError("the exploit corpus is not installed (kictl/_corpus or tests/assets/cheats/corpus.json)")


def load_corpus(folder: Path | None = None) -> LoadedCorpus:
    """Read and validate ``corpus.json``; every entry's file must exist, every session be known.

    Raises ``RecordError`` (exit 3) for a malformed manifest, ``EnvError`` when none is found.
    """
    folder = folder or corpus_folder()
    path = folder / CORPUS_FILE
    value = canon.parse_json(read_file(path, str(path)), source=str(path))
    try:
        corpus = Corpus.model_validate_json(json.dumps(value))
    except ValidationError as exc:
        raise validation_error(exc, value, str(path)) from exc
    for name, entry in corpus.entries.items():
        if not (folder / f"{name}.py").is_file():
            raise RecordError(f"entry {name} has no file {name}.py", path=str(path), pointer=f"$.entries.{name}")
        for session, expectation in entry.expect.items():
            where = f"$.entries.{name}.expect.{session}"
            if session not in corpus.sessions:
                raise RecordError(f"unknown session {session!r}", path=str(path), pointer=where)
            if expectation.status not in STATUSES:
                raise RecordError(f"unknown status {expectation.status!r}", path=str(path), pointer=where)
            if (expectation.status == "reward_hack") != (expectation.checks is not None):
                raise RecordError("reward_hack names its checks, and only it", path=str(path), pointer=where)
    return LoadedCorpus(folder, corpus)


# --------------------------------------------------------------------------- judging


@dataclass(frozen=True, slots=True)
class EntryResult:
    """One entry in one session (and one workload): what it should do, what it did, and the verdict."""

    entry: str
    session: str
    workload: str
    device: str
    exploit_class: str
    expected: str
    status: str | None
    detail: str
    caught: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "entry": self.entry,
            "session": self.session,
            "workload": self.workload,
            "device": self.device,
            "class": self.exploit_class,
            "expected": self.expected,
            "status": self.status,
            "statusDetail": self.detail,
            "caught": self.caught,
        }


def describe(expectation: Expectation) -> str:
    if expectation.status == "reward_hack":
        return f"reward_hack naming {' or '.join(expectation.checks or ())}"
    if expectation.status == "passed":
        return "passed (honest)"
    return f"{expectation.status} ({expectation.detail or ''})"


def failed_checks(detail: str) -> set[str]:
    """The checks a ``reward_hack`` detail names: ``check: why; check: why``."""
    return {part.split(":", 1)[0].strip() for part in detail.split("; ")}


def judge(expectation: Expectation, status: str | None, detail: str | None) -> bool:
    """Whether a run did what its entry expects (docs/advisories.md "Selftest")."""
    text = detail or ""
    if status != expectation.status:
        return False
    if expectation.checks is not None:
        return bool(failed_checks(text) & set(expectation.checks))
    if expectation.detail is not None:
        return expectation.detail in text
    return True


@dataclass
class SelftestReport:
    """What ``kictl selftest`` found."""

    harness: dict[str, str]
    fingerprint: str
    results: list[EntryResult] = field(default_factory=list)
    #: sessions not run here, and why (no GPU)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    at: str = field(default_factory=now_timestamp)
    sandboxed: bool = True

    @property
    def missed(self) -> list[EntryResult]:
        return [result for result in self.results if not result.caught]

    @property
    def ok(self) -> bool:
        return bool(self.results) and not self.missed

    @property
    def devices(self) -> list[str]:
        return sorted({result.device for result in self.results})

    def to_json(self) -> dict[str, Any]:
        return {
            "harness": self.harness,
            "fingerprint": self.fingerprint,
            "at": self.at,
            "ok": self.ok,
            "devices": self.devices,
            "sandboxed": self.sandboxed,
            "entries": [result.to_json() for result in self.results],
            "missed": sorted({result.entry for result in self.missed}),
            "skipped": [{"session": name, "reason": reason} for name, reason in self.skipped],
        }


def harness_fingerprint() -> str:
    """sha256 over the installed kictl package's Python files (path and bytes): which harness code ran."""
    package = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        if "_corpus" in path.relative_to(package).parts:
            continue
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return "sha256:" + digest.hexdigest()


def _options(spec: SessionSpec, no_sandbox: bool) -> Any:
    known = {
        "rounds": ("rounds", int),
        "warmup": ("warmup", int),
        "iterations": ("iterations", int),
        "trials": ("trials", int),
        "timeoutS": ("timeout_s", float),
        "timer": ("timer", str),
        "workerLimits": ("worker_limits", str),
    }
    values: dict[str, Any] = {}
    for name, value in spec.options.items():
        if name not in known:
            raise RecordError(f"unknown session option {name!r}; expected one of {', '.join(known)}")
        attribute, kind = known[name]
        values[attribute] = kind(value)
    return BenchOptions(device=spec.device, workloads=spec.workloads, no_sandbox=no_sandbox, **values)


def _cuda_available() -> bool:
    try:
        import torch  # optional here: a machine without torch has no CUDA to test
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def _under(say: Callable[[str], None], session: str, text: str) -> None:
    """A bench step's progress line, under its session's name."""
    say(f"{session}: {text}")


def run_selftest(
    registry: Registry,
    *,
    device: str = "auto",
    only: Sequence[str] = (),
    corpus: LoadedCorpus | None = None,
    no_sandbox: bool = False,
    progress: Callable[[str], None] | None = None,
) -> SelftestReport:
    """Run the corpus's sessions for ``device`` (auto: CPU, and CUDA where a GPU is present) and judge each entry.

    ``only`` limits the run to the named entries.  Raises ``UsageError`` for
    an unknown device or entry, ``EnvError`` for ``device="cuda"`` without a
    GPU, and what ``kictl bench`` raises for a registry without the sessions'
    definitions.
    """
    loaded = corpus or load_corpus()
    entries = loaded.corpus.entries
    unknown = [name for name in only if name not in entries]
    if unknown:
        raise UsageError(f"no corpus entry {', '.join(unknown)}", details=[f"entries: {', '.join(sorted(entries))}"])
    if device not in ("auto", "cpu", "cuda"):
        raise UsageError(f"unknown device {device!r}; expected auto, cpu or cuda")
    cuda = _cuda_available()
    if device == "cuda" and not cuda:
        raise EnvError("--device cuda: no CUDA GPU is available")
    wanted = {"cpu", "cuda"} if device == "auto" else {device}
    report = SelftestReport(
        harness=dict(harness_identity()), fingerprint=harness_fingerprint(), sandboxed=not no_sandbox
    )
    say = progress or (lambda _line: None)
    planned = []
    for session_name, spec in sorted(loaded.corpus.sessions.items()):
        members = [n for n, e in sorted(entries.items()) if session_name in e.expect and (not only or n in only)]
        if not members or spec.device not in wanted:
            continue
        if spec.device == "cuda" and not cuda:
            report.skipped.append((session_name, "no CUDA GPU here"))
            continue
        planned.append((session_name, spec, members))
    for number, (session_name, spec, members) in enumerate(planned):
        # "K/N sessions done" says what is left (kictl/progress.py); each bench step follows under the session
        say(f"{number}/{len(planned)} sessions done; now {session_name}: {len(members)} entries on {spec.device}")
        bench = run_bench(
            registry,
            spec.definition,
            [str(loaded.source(name)) for name in members],
            _options(spec, no_sandbox),
            progress=functools.partial(_under, say, session_name),
        )
        seen: dict[tuple[str, str], Any] = {}
        for summary in bench.runs:
            seen[(summary.implementation.rsplit("_", 1)[0], summary.workload)] = summary
        for name in members:
            expectation = entries[name].expect[session_name]
            for workload in spec.workloads:
                found = seen.get((name, workload))
                status = None if found is None else found.status
                detail = "no run recorded" if found is None else (found.detail or "")
                report.results.append(
                    EntryResult(
                        entry=name,
                        session=session_name,
                        workload=workload,
                        device=spec.device,
                        exploit_class=entries[name].exploit_class,
                        expected=describe(expectation),
                        status=status,
                        detail=detail,
                        caught=judge(expectation, status, detail),
                    )
                )
    if planned:
        say(f"{len(planned)}/{len(planned)} sessions done")
    if not report.results and not report.skipped:
        raise UsageError("no corpus entry runs on " + " or ".join(sorted(wanted)))
    return report


# --------------------------------------------------------------------------- the record attest rerun reads


def result_file() -> Path:
    """This machine's selftest results: ``selftest.json`` beside the user's kictl config (``kictl trust pin``'s)."""
    return config_file().with_name(RESULT_FILE)


def write_result(report: SelftestReport, also: Path | None = None) -> list[Path]:
    """Keep the report in ``result_file()`` (the latest per harness identity and device kind) and write it alone
    to ``also``/ (the results folder a verifier signs from).

    Raises ``RegistryError`` (exit 4) when a file cannot be written.
    """
    path = result_file()
    kept: dict[str, Any] = {}
    try:
        value = json.loads(path.read_bytes())
        if isinstance(value, dict) and isinstance(value.get("results"), list):
            for item in value["results"]:  # one result per harness and device kind: the latest decides
                for device in item.get("devices") or [] if isinstance(item, dict) else []:
                    kept[_result_key({**item, "devices": [device]})] = {**item, "devices": [device]}
    except (OSError, ValueError):
        kept = {}
    mine = report.to_json()
    for device in report.devices or ["none"]:
        kept[_result_key({**mine, "devices": [device]})] = {**mine, "devices": [device]}
    everything = (json.dumps({"results": sorted(kept.values(), key=_result_key)}, indent=2) + "\n").encode()
    this_run = (json.dumps({"results": [mine]}, indent=2) + "\n").encode()
    written = []
    for target, data in ((path, everything), (None if also is None else also / RESULT_FILE, this_run)):
        if target is None:
            continue
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RegistryError(f"{target.parent}: cannot create: {exc.strerror}") from exc
        write_atomic(target, data)
        written.append(target)
    return written


def _result_key(item: Mapping[str, Any]) -> str:
    harness = item.get("harness") or {}
    devices = item.get("devices") or []
    return json.dumps([harness.get("name"), harness.get("version"), harness.get("commit"), devices], sort_keys=True)


def _passing_devices(folders: Iterable[Path], harness: Mapping[str, Any]) -> set[str]:
    """Device kinds on which a passing selftest of ``harness`` (name, version, commit) is recorded."""
    found: set[str] = set()
    for folder in folders:
        try:
            value = json.loads((folder / RESULT_FILE).read_bytes())
        except (OSError, ValueError):
            continue
        results = value.get("results") if isinstance(value, dict) else None
        for item in results if isinstance(results, list) else []:
            if (
                not isinstance(item, dict)
                or item.get("ok") is not True
                or item.get("missed")
                or not item.get("sandboxed")
            ):
                continue
            tested = item.get("harness") or {}
            if all(tested.get(part) == harness.get(part) for part in ("name", "version", "commit")):
                found.update(device for device in item.get("devices") or [] if isinstance(device, str))
    return found


def require_sound_harness(registry: Registry, folder: Path | None, protocols: Iterable[Mapping[str, Any]]) -> None:
    """Refuse to sign reruns measured by a harness that failed (or never passed) its selftest, or that an open
    advisory names (``kictl attest rerun``).

    ``protocols`` are the rerun runs' BenchmarkProtocol specs.  A passing
    selftest of the same harness (name, version, commit) on the same kind of
    device must be recorded in ``folder/selftest.json`` (written by
    ``kictl selftest --out`` on the machine that reran) or this machine's
    ``result_file()``.  Raises ``CheckFailed`` (exit 1) naming the harness.
    """
    specs = list(protocols)
    advisories = load_advisories(registry).open() if has_advisories(registry) else []
    folders = [path for path in (folder, result_file().parent) if path is not None]
    for spec in specs:
        harness = spec.get("harness") or {}
        measurement = spec.get("measurement") or {}
        named = f"{harness.get('name')} {harness.get('version')}" + (
            f" ({harness['commit']})" if harness.get("commit") else ""
        )
        hits = [advisory.id for advisory in advisories if protocol_matches(advisory.affects, spec)]
        if hits:
            raise CheckFailed(
                f"the rerun's harness {named} is named by open advisory {', '.join(hits)}: "
                "rerun with a fixed harness (docs/advisories.md)"
            )
        device = str(measurement.get("device") or "cpu")
        kind = "cuda" if device.startswith("cuda") else "cpu"
        if kind not in _passing_devices(folders, harness):
            raise CheckFailed(
                f"no passing selftest of the rerun's harness {named} on {kind}: run `kictl selftest --device {kind}` "
                "where the reruns ran (with --out into the results folder) and sign again"
            )


def harness_protocols(records: Iterable[Any]) -> list[Mapping[str, Any]]:
    """The BenchmarkProtocol specs among stored records."""
    specs = []
    for record in records:
        if getattr(record, "kind", None) == "BenchmarkProtocol":
            specs.append(record.raw["spec"])
    return specs


__all__ = [
    "CORPUS_FILE",
    "RESULT_FILE",
    "Corpus",
    "EntryResult",
    "LoadedCorpus",
    "SelftestReport",
    "corpus_folder",
    "failed_checks",
    "harness_fingerprint",
    "harness_protocols",
    "judge",
    "load_corpus",
    "require_sound_harness",
    "run_selftest",
    "write_result",
]

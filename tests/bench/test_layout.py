"""The layout shows the wall: the sandbox holds the worker and the protocol, derived from the packages."""

from __future__ import annotations

import ast
import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kictl
from kictl.bench import worker
from kictl.bench.judge.options import BenchOptions
from kictl.bench.judge.session import possible_timers
from kictl.bench.wire import timers
from kictl.bench.worker import timing

KICTL = Path(kictl.__file__).resolve().parent
SHARED_LEAVES = {Path("__init__.py"), Path("errors.py"), Path("blobs.py"), Path("dtypes.py")}


def _in(path: Path, package: str) -> bool:
    return path.parts[: len(Path(package).parts)] == Path(package).parts


def test_the_sandbox_holds_the_worker_the_protocol_and_three_leaf_modules() -> None:
    files = set(worker.FILES)
    packaged = {path.relative_to(KICTL) for package in worker.PACKAGES for path in (KICTL / package).rglob("*.py")}
    assert packaged <= files  # every module of both packages, none listed by hand
    outside = {path for path in files if not any(_in(path, package) for package in worker.PACKAGES)}
    assert outside == SHARED_LEAVES, f"the worker now reaches {sorted(map(str, outside - SHARED_LEAVES))}"
    assert not any(_in(path, "bench/judge") for path in files)


def test_a_worker_module_that_imports_the_judge_pulls_it_into_the_sandbox(tmp_path: Path) -> None:
    """The list is derived: an import inside a function, of a module outside, is followed transitively."""
    root = tmp_path / "kictl"
    for relative, text in {
        "__init__.py": "",
        "errors.py": "",
        "records.py": "import json\n",
        "bench/wire/__init__.py": "from kictl import errors\n",
        "bench/worker/__init__.py": "",
        "bench/worker/main.py": "def f():\n    from kictl.bench.judge.loop import run\n",
        "bench/judge/__init__.py": "",
        "bench/judge/loop.py": "import kictl.records\n",
        "bench/judge/session.py": "",
    }.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    found = {str(path) for path in worker.sandbox_files(root)}
    assert {"bench/judge/loop.py", "bench/judge/__init__.py", "records.py", "errors.py"} <= found
    assert "bench/judge/session.py" not in found


def test_the_watched_modules_are_the_worker_and_the_protocol() -> None:
    assert "kictl.bench.worker.main" in worker.MODULES
    assert "kictl.bench.wire" in worker.MODULES
    assert "kictl.bench.wire.tensors" in worker.MODULES
    assert all(name.startswith(("kictl.bench.worker", "kictl.bench.wire")) for name in worker.MODULES)
    assert "kictl.bench.worker.__main__" not in worker.MODULES


def test_every_timer_row_has_a_worker_class_of_its_name_and_back() -> None:
    assert {row.name for row in timers.TIMERS} == set(timing._CLASSES)
    for row in timers.TIMERS:
        assert timing._CLASSES[row.name].name == row.name


# what the parallel if-chains answered before the table (session.resolve_timer/possible_timers, fff4360)
_BEFORE = {
    ("cpu", "auto", False, False): ("perf_counter_ns",),
    ("cpu", "auto", False, True): ("perf_counter_ns",),
    ("cuda", "auto", False, False): ("cupti_device_time", "cuda_events"),
    ("cuda", "auto", True, False): ("cuda_graph_replay",),
    ("cuda", "graph", True, False): ("cuda_graph_replay",),
    ("cuda", "auto", False, True): ("cuda_events_host_inclusive",),
    ("cuda", "events", False, True): ("cuda_events_host_inclusive",),
    ("cuda", "events", False, False): ("cuda_events",),
    ("cuda", "cupti", False, False): ("cupti_device_time",),
}


@pytest.mark.parametrize(("device", "timer", "graph", "setup"), sorted(_BEFORE))
def test_the_table_chooses_what_the_chains_chose(device: str, timer: str, graph: bool, setup: bool) -> None:
    options = BenchOptions(timer=timer, cuda_graph=graph, time_setup=setup)
    assert possible_timers(options, "cuda:0" if device == "cuda" else "cpu") == _BEFORE[(device, timer, graph, setup)]


def test_every_row_is_reachable_and_records_a_known_family() -> None:
    reached = {
        row.name
        for device, timer, graph, setup in itertools.product(
            ("cpu", "cuda:0"), timers.OPTIONS, (False, True), (False, True)
        )
        for row in timers.choices(device, timer, graph, setup)
    }
    assert reached == set(timers.BY_NAME)
    assert {row.family for row in timers.TIMERS} >= {"kictl-cpu-wall-time", "kictl-cupti-device-time"}


def _torch_imports(path: Path) -> list[int]:
    """The lines of ``path`` that import torch (``import torch``, ``import torch.x``, ``from torch... import``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            names = [node.module]
        else:
            continue
        if any(name == "torch" or name.startswith("torch.") for name in names):
            found.append(node.lineno)
    return found


def test_torch_is_imported_late_in_two_accessors_of_the_bench_packages() -> None:
    """``wire.lazy.torch_module`` and ``worker.timing._torch`` are the only imports of torch under ``kictl/bench``,
    each inside its function: the judge's and the protocol's modules are imported by commands without tensors,
    the timing module's statistics by the index and the leaderboards, and the worker sets up its process before
    torch comes (issue 44)."""
    accessors = {"bench/wire/lazy.py": "torch_module", "bench/worker/timing.py": "_torch"}
    found = {
        path.relative_to(KICTL).as_posix(): lines
        for path in sorted((KICTL / "bench").rglob("*.py"))
        if (lines := _torch_imports(path))
    }
    assert set(found) == set(accessors), found
    for relative, name in accessors.items():
        (line,) = found[relative]
        tree = ast.parse((KICTL / relative).read_text(encoding="utf-8"))
        (function,) = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == name]
        assert function.lineno < line <= (function.end_lineno or 0), relative


def test_the_torch_finder_sees_every_spelling(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("import os\nimport torch.cuda\nfrom torch import nn\ndef f():\n    import torch as t\n")
    assert _torch_imports(source) == [2, 3, 5]


def test_torch_is_imported_with_the_collector_paused_and_the_collector_restored(tmp_path: Path) -> None:
    """``torch_module``'s first import runs without cyclic collections (a tenth of torch's import), and leaves the
    collector as it found it, on or off; a stand-in ``torch`` records what its import saw."""
    (tmp_path / "torch.py").write_text("import gc\nCOLLECTING = gc.isenabled()\n")
    probe = (
        "import gc, sys\n"
        "from kictl.bench.wire.lazy import torch_module\n"
        "if sys.argv[1] == 'off':\n"
        "    gc.disable()\n"
        "torch = torch_module()\n"
        "print(torch.COLLECTING, gc.isenabled(), torch_module() is torch)\n"
    )
    seen = {}
    for state in ("on", "off"):
        done = subprocess.run(
            [sys.executable, "-c", probe, state],
            env={**os.environ, "PYTHONPATH": str(tmp_path)},
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        seen[state] = done.stdout.split()
    assert seen == {"on": ["False", "True", "True"], "off": ["False", "False", "True"]}

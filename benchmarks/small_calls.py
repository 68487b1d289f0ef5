"""What the experiments on small FlashInfer calls share (issue 11; ``rebuild_effect.py``, ``address_effect.py``,
``gap_effect.py``, ``launch_alignment.py``, ``launch_phase_remedy.py``, ``thermal_effect.py``).

``start()`` attaches CUPTI (a collector that keeps what each settle drained, so that a script can read a call's
kernels one by one), binds kictl's timer functions and opens the repository's registry; ``Harness.workload``
gives a bundled workload's inputs, synthesised as ``kictl bench`` synthesises them, and a fresh copy of the
definition's bundled FlashInfer wrapper.  ``call_kernels`` picks a call's own kernels out of what was drained.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: a gap between a call's two kernels above this is the long one (about 2 µs against 1.1 on the H200)
LONG_GAP_NS = 1_500


def load_wrapper(definition: str) -> Any:
    """The bundled FlashInfer wrapper of ``definition``, as a module of its own (its plans and workspaces too)."""
    folder = ROOT / "implementations" / definition / "flashinfer_wrapper"
    path = next(p for p in sorted(folder.glob("*.py")))
    spec = importlib.util.spec_from_file_location(f"fi_{definition}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def call_kernels(activities: list[Any]) -> list[Any]:
    """The call's kernels: after the harness's spin, before its end marker (both ``spin_kernel``)."""
    from kictl.bench.cupti_timer import KERNEL, SPIN_KERNEL_NAME

    ordered = sorted((a for a in activities if a.kind == KERNEL), key=lambda a: a.start_ns)
    spins = [n for n, a in enumerate(ordered) if SPIN_KERNEL_NAME in a.name]
    if len(spins) < 2:
        return []
    return ordered[spins[-2] + 1 : spins[-1]]


def gaps(kernels: list[Any]) -> list[int]:
    """The gaps between consecutive kernels of one call (ns)."""
    return [later.start_ns - earlier.end_ns for earlier, later in itertools.pairwise(kernels)]


def short(name: str) -> str:
    """A kernel's name, shortened to what tells FlashInfer's kernels apart."""
    for key in ("Merge", "Prefill", "Decode", "elementwise", "Fill"):
        if key in name:
            return key
    return name[:24]


class ReadFlush:
    """Stands in for a timer's flush buffer: ``zero_()`` reads the buffer instead of writing it."""

    def __init__(self, buffer: Any) -> None:
        import torch

        self.words = buffer.view(torch.int32)
        self.sink: Any = None

    def zero_(self) -> None:
        self.sink = self.words.sum()


@dataclass
class Harness:
    """CUPTI attached, kictl's timer functions bound, the registry open (``start``)."""

    device: str
    collector: Any
    registry: Any
    flush_bytes: int

    def timer(self, launch_phases: int | None = None) -> Any:
        """A new ``CuptiTimer`` on this harness's collector (its own flush buffer), padded as kictl pads unless
        ``launch_phases`` says otherwise."""
        from kictl.bench import timing

        phases = timing.LAUNCH_PHASES if launch_phases is None else launch_phases
        return timing.CuptiTimer(self.device, self.flush_bytes, self.collector, launch_phases=phases)

    def inputs(self, definition_name: str, label: str) -> list[Any]:
        """The workload's inputs on the device, synthesised as ``kictl bench`` synthesises them."""
        from kictl.bench.inputs import materialize, plan_inputs
        from kictl.bench.session import select_workloads
        from kictl.definitions import signature
        from kictl.records import DefinitionSpec

        definition = self.registry.resolve(definition_name, ["Definition"])
        spec = definition.model.spec
        assert isinstance(spec, DefinitionSpec)
        order = signature(spec, source=definition_name).inputs
        (workload,) = select_workloads(self.registry, definition, [label])
        return list(materialize(plan_inputs(spec, workload, order, self.registry.read_blob), self.device))

    def workload(self, definition_name: str, label: str) -> tuple[list[Any], Any]:
        """The workload's inputs and a fresh copy of the definition's FlashInfer wrapper, planned for them."""
        inputs = self.inputs(definition_name, label)
        wrapper = load_wrapper(definition_name)
        wrapper.setup(*inputs)
        return inputs, wrapper


def start() -> Harness | None:
    """The harness on ``cuda:0`` (``None``, said on stderr: no CUDA device)."""
    import torch

    from kictl.bench import timing
    from kictl.bench.cupti_timer import CuptiCollector
    from kictl.bench.options import flush_bytes
    from kictl.store import Registry

    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return None

    class Keeping(CuptiCollector):
        """kictl's collector, keeping what each settle drained (``last``)."""

        last: list[Any] = []  # noqa: RUF012 - replaced per drain, never mutated

        def drain_all(self) -> Any:
            activities, dependencies = super().drain_all()
            self.last = list(activities)
            return activities, dependencies

    device = "cuda:0"
    collector = Keeping()
    collector.start()
    timing.bind_originals()
    l2 = int(getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0))
    return Harness(device, collector, Registry(ROOT), flush_bytes(device, {"l2CacheBytes": l2}))

"""``pytest -n 2 --dist loadscope``: whole modules to each process, the costliest first.

xdist's ``loadscope`` sends all the tests of a module (or of a test class) to one process, so that a
module's fixtures are built once, and starts the modules with the most tests first. Most of this
suite's time is in a few modules with few tests: the bundled definitions' five tests take a quarter of
a CI run's CPU time, and ``loadscope`` started them last, to run alone on one core for the last two
minutes. This scheduler keeps ``loadscope``'s units, but makes one unit of each folder whose
conftest.py builds session fixtures (built once, not once per process), and orders them by the seconds that
``tests/heavy_tests.txt`` records (tests/durations.py writes them), a tenth of a second for every
test it does not list: the longest first, each to the process that asks next. A greedy schedule in
that order ends within a third of the best one (Graham's bound for the longest-first rule); what
the orders measured is in docs/testing.md.

``tests/conftest.py`` installs it for ``--dist loadscope`` only; ``-n N`` alone keeps xdist's ``load``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling

from tests.durations import recorded_costs

__all__ = ["CostliestFirstScheduling", "costliest_first", "recorded_costs", "session_fixture_folders"]

#: The seconds charged to a test that tests/heavy_tests.txt does not list (most take 0.02-0.5 s).
LIGHT_TEST_S = 0.1


def costliest_first(collection: Sequence[str], costs: dict[str, float], unit_of: Callable[[str], str]) -> list[str]:
    """The units of ``collection`` (``unit_of`` a node id), ordered by cost, the largest first.

    A unit costs the recorded seconds of its tests (``LIGHT_TEST_S`` for one not recorded); a module recorded
    whole is charged once, to the unit of its first test. Ties keep the collection's order.
    """
    cost: dict[str, float] = {}
    charged: set[str] = set()
    for nodeid in collection:
        unit = unit_of(nodeid)
        module = nodeid.split("::", 1)[0]
        cost[unit] = cost.get(unit, 0.0) + costs.get(nodeid, LIGHT_TEST_S)
        if module in costs and module not in charged:
            charged.add(module)
            cost[unit] += costs[module]
    return sorted(cost, key=lambda unit: -cost[unit])  # sorted() is stable: ties keep the collection's order


def session_fixture_folders(root: Path, tests: Path) -> tuple[str, ...]:
    """The folders under ``tests`` whose conftest.py builds a session fixture, as node-id prefixes (``tests/rerun/``).

    Each process that runs a test of such a folder builds its session fixtures (a signed registry with
    benchmarked runs takes 20-45 s): its modules go to one process, as one unit, so they are built once.
    """
    found = []
    for conftest in sorted(tests.rglob("conftest.py")):
        folder = conftest.parent
        if folder == tests or "assets" in folder.relative_to(tests).parts:
            continue
        if 'scope="session"' in conftest.read_text(encoding="utf-8"):
            found.append(folder.relative_to(root).as_posix() + "/")
    return tuple(found)


class CostliestFirstScheduling(LoadScopeScheduling):  # type: ignore[misc]  # xdist is untyped
    """loadscope with its units ordered by ``costliest_first`` rather than by their count of tests."""

    collection: list[str] | None  # LoadScopeScheduling's: every node id, once all processes collected

    def __init__(
        self, config: pytest.Config, log: Producer | None, costs: dict[str, float], whole: Sequence[str] = ()
    ) -> None:
        super().__init__(config, log)
        self.costs = costs
        #: node-id prefixes (folders) whose tests are one unit (``session_fixture_folders``)
        self.whole = tuple(whole)

    def _split_scope(self, nodeid: str) -> str:
        for folder in self.whole:
            if nodeid.startswith(folder):
                return folder
        scope: str = super()._split_scope(nodeid)
        return scope

    def schedule(self) -> None:
        """The first distribution as ``LoadScopeScheduling.schedule`` makes it, in this order; later calls as it."""
        assert self.collection_is_completed
        if self.collection is not None:
            super().schedule()
            return
        if not self._check_nodes_have_same_collection():
            self.log("**Different tests collected, aborting run**")
            return
        # a process names its tests by their index in its own collection: these are left as they came
        self.collection = list(next(iter(self.registered_collections.values())))
        if not self.collection:
            return
        units: dict[str, dict[str, bool]] = {}
        for nodeid in self.collection:
            units.setdefault(self._split_scope(nodeid), {})[nodeid] = False
        for unit in costliest_first(self.collection, self.costs, self._split_scope):
            self.workqueue[unit] = units[unit]
        for _ in range(max(0, len(self.nodes) - len(self.workqueue))):  # more processes than units
            unused, _assigned = self.assigned_work.popitem()
            unused.shutdown()
        for node in self.nodes:
            self._assign_work_unit(node)
        for node in self.nodes:  # each starts with two units where there are enough (as loadscope does)
            self._reschedule(node)
        if not self.workqueue:
            for node in self.nodes:
                node.shutdown()

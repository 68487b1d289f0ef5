"""What each test costs, and the list of heavy tests that the inner loop leaves out.

A developer's tool beside the list it writes, not a test (pytest collects ``test_*.py`` only) and not a
benchmark (it backs no claim): docs/testing.md, "The inner loop".  Formerly ``benchmarks/test_durations.py``.

Reads one or more JUnit XML reports (``pytest --junitxml=FILE``; each test's time there is its
setup, call and teardown together, so a test that builds a module's shared fixture is charged for
it), prints a table per area (tests, seconds, the share over the threshold), and with ``--write``
rewrites ``tests/heavy_tests.txt``: the node ids whose time is over ``--threshold`` seconds, each
with its time, and whole modules whose heavy tests hold most of their time (they share an
expensive fixture with their cheap tests, which would pay for it in the loop).
``tests/conftest.py`` marks those (and every ``slow`` test) ``heavy``, so that

    pytest -q -m "not heavy"

is the inner loop (docs/testing.md).  Refresh the list after adding expensive tests:

    pytest -q -p no:randomly --junitxml=/tmp/all.xml          # the whole suite, once
    python tests/durations.py /tmp/all.xml --write
"""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HEAVY_FILE = REPO / "tests" / "heavy_tests.txt"


def recorded_costs(path: Path) -> dict[str, float]:
    """``node id or module path -> seconds`` from a heavy-tests file (``id  # 12.3 s`` lines); {} without one."""
    if not path.is_file():
        return {}
    costs: dict[str, float] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#") or "  #" not in line:
            continue
        node, _, comment = line.partition("  #")
        seconds = comment.strip().removesuffix("s").strip()
        try:
            costs[node.strip()] = float(seconds)
        except ValueError:
            continue
    return costs


def node_id(case: ET.Element) -> str:
    """``tests/rank/test_rank.py::test_x[param]`` from a JUnit testcase (classname is dotted)."""
    classname = case.get("classname", "")
    name = case.get("name", "")
    parts = [part for part in classname.split(".") if part]
    # the module is the longest dotted prefix that is a file under tests/
    for cut in range(len(parts), 0, -1):
        module = Path(*parts[:cut]).with_suffix(".py")
        if (REPO / module).is_file():
            rest = parts[cut:]
            return "::".join([module.as_posix(), *rest, name])
    return f"{classname}::{name}"


def read(paths: list[Path]) -> dict[str, float]:
    times: dict[str, float] = {}
    for path in paths:
        for case in ET.parse(path).iter("testcase"):
            if case.find("skipped") is not None:
                continue
            times[node_id(case)] = float(case.get("time", "0"))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--threshold", type=float, default=1.0, help="seconds above which a test is heavy")
    parser.add_argument("--write", action="store_true", help=f"rewrite {HEAVY_FILE.relative_to(REPO)}")
    args = parser.parse_args()
    times = read(args.reports)
    areas: dict[str, list[float]] = defaultdict(list)
    for node, seconds in times.items():
        module = node.split("::", 1)[0]
        area = "/".join(module.split("/")[:2]) if module.count("/") > 1 else "tests/*.py"
        areas[area].append(seconds)
    print(f"| area | tests | seconds | heavy (> {args.threshold:g} s) | their seconds | the rest's seconds |")
    print("|---|---:|---:|---:|---:|---:|")
    counted: list[float] = [0, 0.0, 0, 0.0]  # tests, seconds, heavy tests, their seconds
    for area, values in sorted(areas.items(), key=lambda item: -sum(item[1])):
        heavy = [value for value in values if value > args.threshold]
        row = [len(values), sum(values), len(heavy), sum(heavy)]
        counted = [a + b for a, b in zip(counted, row, strict=True)]
        print(f"| {area} | {row[0]} | {row[1]:.0f} | {row[2]} | {row[3]:.0f} | {row[1] - row[3]:.0f} |")
    tests, seconds, heavies, theirs = counted
    print(f"| all | {tests:.0f} | {seconds:.0f} | {heavies:.0f} | {theirs:.0f} | {seconds - theirs:.0f} |")
    if args.write:
        heavy_nodes = sorted(node for node, seconds in times.items() if seconds > args.threshold)
        # a module whose heavy tests hold most of its time shares an expensive fixture with its cheap ones
        # (the first test pays for it): leaving the heavy ones out would hand the cost to the next test
        modules: dict[str, list[tuple[str, float]]] = defaultdict(list)
        for node, seconds in times.items():
            modules[node.split("::", 1)[0]].append((node, seconds))
        for module, members in modules.items():
            total = sum(seconds for _, seconds in members)
            heavy_time = sum(seconds for _, seconds in members if seconds > args.threshold)
            cheap = [node for node, seconds in members if seconds <= args.threshold]
            if cheap and total > 5 * args.threshold and heavy_time > 0.8 * total:
                heavy_nodes = [node for node in heavy_nodes if not node.startswith(module + "::")] + [module]
                times[module] = total
        heavy_nodes.sort()
        lines = [
            "# Tests the inner loop leaves out (pytest -m 'not heavy'): more than "
            f"{args.threshold:g} s each on the 2-core development VM.",
            "# Written by tests/durations.py from a JUnit report of the whole suite; each id with its time.",
            *(f"{node}  # {times[node]:.1f} s" for node in heavy_nodes),
        ]
        HEAVY_FILE.write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"wrote {len(heavy_nodes)} node ids to {HEAVY_FILE.relative_to(REPO)}")


if __name__ == "__main__":
    main()

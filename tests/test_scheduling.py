"""The suite's own xdist scheduler (tests/scheduling.py): loadscope's units, the costliest first."""

from __future__ import annotations

import getpass
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import HEAVY_FILE, REPO_ROOT
from tests.scheduling import LIGHT_TEST_S, costliest_first, recorded_costs, session_fixture_folders


def _unit(nodeid: str) -> str:
    return nodeid.rsplit("::", 1)[0]


def test_the_recorded_costs_are_read_from_the_heavy_list(tmp_path: Path) -> None:
    listed = tmp_path / "heavy.txt"
    listed.write_text(
        "# a comment  # 3.0 s\n"
        "tests/a.py::test_x[p]  # 12.5 s\n"
        "tests/b.py  # 4.0 s\n"
        "tests/c.py::test_y  # not a time\n"
        "\n",
        encoding="utf-8",
    )
    assert recorded_costs(listed) == {"tests/a.py::test_x[p]": 12.5, "tests/b.py": 4.0}
    assert recorded_costs(tmp_path / "absent.txt") == {}
    real = recorded_costs(HEAVY_FILE)  # the list tests/durations.py writes: every entry carries its time
    entries = [line for line in HEAVY_FILE.read_text(encoding="utf-8").splitlines() if line and line[0] != "#"]
    assert len(real) == len(entries) > 0


def test_units_go_costliest_first_and_ties_keep_the_collection_order() -> None:
    collection = [
        "tests/many.py::test_1",
        "tests/many.py::test_2",
        "tests/many.py::test_3",
        "tests/one.py::test_big[x]",
        "tests/one.py::test_small",
        "tests/whole.py::test_a",
        "tests/whole.py::TestK::test_b",
        "tests/light_a.py::test_a",
        "tests/light_b.py::test_b",
    ]
    costs = {"tests/one.py::test_big[x]": 100.0, "tests/whole.py": 50.0, "tests/many.py::test_2": 1.0}
    order = costliest_first(collection, costs, _unit)
    # one.py 100.1; whole.py's first unit carries the module's 50; many.py 1.2; the rest 0.1 each, in collection order
    assert order == [
        "tests/one.py",
        "tests/whole.py",
        "tests/many.py",
        "tests/whole.py::TestK",
        "tests/light_a.py",
        "tests/light_b.py",
    ]
    assert costliest_first([], costs, _unit) == []
    assert LIGHT_TEST_S > 0  # an unlisted unit of many tests still goes before one of a single test


def test_a_folder_whose_conftest_builds_session_fixtures_is_one_unit(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    for folder, text in (
        ("", '@pytest.fixture(scope="session")\n'),  # the top conftest's fixtures reach every process anyway
        ("shared", '@pytest.fixture(scope="session")\ndef world(): ...\n'),
        ("shared/deeper", "@pytest.fixture\n"),
        ("plain", '@pytest.fixture(scope="module")\n'),
        ("assets/x", '@pytest.fixture(scope="session")\n'),
    ):
        (tests / folder).mkdir(parents=True, exist_ok=True)
        (tests / folder / "conftest.py").write_text(text, encoding="utf-8")
    assert session_fixture_folders(tmp_path, tests) == ("tests/shared/",)
    assert "tests/rerun/" in session_fixture_folders(REPO_ROOT, REPO_ROOT / "tests")
    collection = ["tests/shared/test_a.py::test_1", "tests/shared/deeper/test_b.py::test_2", "tests/plain.py::test_3"]
    whole = session_fixture_folders(tmp_path, tests)

    def unit(nodeid: str) -> str:
        return next((folder for folder in whole if nodeid.startswith(folder)), _unit(nodeid))

    assert costliest_first(collection, {"tests/plain.py::test_3": 1.0}, unit) == ["tests/plain.py", "tests/shared/"]


def test_a_loadscope_run_starts_the_costliest_unit_first(tmp_path: Path) -> None:
    """A real ``pytest -n 1 --dist loadscope`` over three modules: the one process runs the units in the order
    the recorded costs give, not xdist's (most tests first)."""
    for name, tests in (("test_many", 4), ("test_costly", 1), ("test_middle", 1)):
        body = "".join(
            f"def test_{n}():\n    with open('order.txt', 'a') as f:\n        f.write('{name}\\n')\n\n"
            for n in range(tests)
        )
        (tmp_path / f"{name}.py").write_text(body, encoding="utf-8")
    (tmp_path / "heavy.txt").write_text("test_costly.py::test_0  # 30.0 s\ntest_middle.py  # 2.0 s\n")
    (tmp_path / "conftest.py").write_text(
        "from pathlib import Path\n"
        "import pytest\n"
        "from tests.scheduling import CostliestFirstScheduling, recorded_costs\n\n"
        "@pytest.hookimpl(optionalhook=True)\n"
        "def pytest_xdist_make_scheduler(config, log):\n"
        "    costs = recorded_costs(Path(__file__).parent / 'heavy.txt')\n"
        "    return CostliestFirstScheduling(config, log, costs)\n",
        encoding="utf-8",
    )
    # the outer run's own xdist and pytest variables stay out of the inner run (a fresh-clone CI run at d4fb9d3
    # saw the inner run print its six dots and then not end within 120 s; it passed in every other full run)
    env = {name: value for name, value in os.environ.items() if not name.startswith(("PYTEST_", "PYTEST_XDIST"))}
    env["PYTHONPATH"] = str(REPO_ROOT)
    # its own --basetemp: xdist makes the controller take a numbered folder under /tmp/pytest-of-USER, and a session
    # that took one deletes, as it ends, every finished session's folder but the last three there. Those were the
    # outer run's neighbours: whole suites' registries, up to millions of files (on the shared dev VM this test
    # took 2-120 s, as much as there was to delete; with its own folder, 2 s)
    basetemp = tmp_path / "basetemp"
    temproot = tmp_path / "temproot"  # where a numbered folder would go: a finished session's, five back, stays
    neighbour = temproot / f"pytest-of-{getpass.getuser()}" / "pytest-0" / "kept.txt"
    for number in range(5):
        (neighbour.parent.parent / f"pytest-{number}").mkdir(parents=True)
    neighbour.write_text("a finished session's file\n", encoding="utf-8")
    env["PYTEST_DEBUG_TEMPROOT"] = str(temproot)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={basetemp}"]
    done = subprocess.run(
        [*command, "-n", "1", "--dist", "loadscope"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    ran = (tmp_path / "order.txt").read_text(encoding="utf-8").split()
    assert ran == ["test_costly", "test_middle", *["test_many"] * 4]
    assert neighbour.is_file()
    assert basetemp.is_dir()

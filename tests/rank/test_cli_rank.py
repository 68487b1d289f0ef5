"""`kictl leaderboard/floor/diff/history/cite` end to end, on real registries in git."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from kictl.canon import pretty_bytes
from kictl.records import StoredRecord
from tests.conftest import REPO_ROOT, RunCli
from tests.rank.conftest import NOW, World, days_ago


def _lines_fit(text: str) -> None:
    too_long = [line for line in text.splitlines() if len(line) > 100]
    assert not too_long, too_long


@pytest.fixture
def ranked(world: World, basic: dict[str, StoredRecord]) -> dict[str, StoredRecord]:
    """Two workloads on the H200, one on the B200, a failed run and a stale one."""
    b = basic
    b["run_fast_m128"] = world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 10_000)
    b["run_slow_m128"] = world.run(b["m128"], b["slow"], b["protocol"], b["h200"], 10_100)
    b["run_fi_m128"] = world.run(b["m128"], b["flashinfer"], b["protocol"], b["h200"], 15_000, observed=days_ago(500))
    b["run_failed"] = world.run(b["m128"], b["reference"], b["protocol"], b["h200"], None, status="runtime_error")
    b["run_fi_m1"] = world.run(b["m1"], b["flashinfer"], b["protocol"], b["h200"], 900)
    b["run_fast_m1"] = world.run(b["m1"], b["fast"], b["protocol"], b["h200"], 1_200)
    b["run_b200"] = world.run(b["m128"], b["slow"], b["protocol"], b["b200"], 6_000)
    world.commit("runs")
    return b


def test_leaderboard_summary_json(cli: RunCli, world: World, ranked: dict[str, StoredRecord]) -> None:
    result = cli("leaderboard", "gemm_n64_k64", "--registry", world.registry.root, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["definition"] == {
        "name": "gemm_n64_k64",
        "digest": ranked["definition"].digest,
        "family": "gemm",
    }
    assert doc["baseline"] == {"implementation": "flashinfer_wrapper_abc123", "source": "flashinfer"}
    assert doc["workloads"] == 2
    boards = {board["gpu"]: board for board in doc["boards"]}
    assert set(boards) == {"B200", "H200"}
    records = {r["workloadName"]: r for r in boards["H200"]["records"]}
    assert records["m128"]["implementation"] == "fast"
    assert records["m128"]["latencyNs"] == 10_000
    assert records["m128"]["tiedForFirst"] == ["slow"]
    assert records["m128"]["baselineUnbeaten"] is False
    assert records["m128"]["run"] == ranked["run_fast_m128"].digest
    assert records["m1"]["implementation"] == "flashinfer_wrapper_abc123"
    assert records["m1"]["baselineUnbeaten"] is True
    standings = {s["implementation"]: s for s in boards["H200"]["implementations"]}
    assert standings["fast"]["covered"] == 2
    assert standings["fast"]["wins"] == 1
    assert standings["slow"]["wins"] == 1  # tied for first on m128
    # fast: 15000/10000 on m128 and 900/1200 on m1 → geometric mean sqrt(1.5 × 0.75)
    assert standings["fast"]["geomeanSpeedupOverBaseline"] == pytest.approx((1.5 * 0.75) ** 0.5)
    assert "H200" not in doc["challenges"]
    assert "A100 SXM 80GB" in doc["challenges"]
    assert doc["unranked"] == 0


def test_leaderboard_summary_text(cli: RunCli, world: World, ranked: dict[str, StoredRecord]) -> None:
    result = cli("leaderboard", ranked["definition"].digest[:15], "--registry", world.registry.root)
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "H200 · kictl-cuda-events · median: records on 2 of 2 workloads" in text
    assert "open challenges (no passed run yet):" in text
    _lines_fit(text)


def test_leaderboard_gpu_filter_and_alias(cli: RunCli, world: World, ranked: dict[str, StoredRecord]) -> None:
    result = cli("leaderboard", "gemm_n64_k64", "--gpu", "NVIDIA B200", "--registry", world.registry.root, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [board["gpu"] for board in doc["boards"]] == ["B200"]
    assert doc["challenges"] == []


def test_leaderboard_workload_json(cli: RunCli, world: World, ranked: dict[str, StoredRecord]) -> None:
    result = cli(
        "leaderboard", "gemm_n64_k64", "--workload", "m128", "--gpu", "H200",
        "--registry", world.registry.root, "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (group,) = json.loads(result.stdout)
    assert group["gpu"] == "H200"
    assert group["comparisonKey"].startswith("sha256:")
    assert len(group["comparisonKey"]) == 71
    assert group["workload"] == ranked["m128"].digest
    rows = [(r["rank"], r["implementation"], r["latencyNs"], r["stale"]) for r in group["rows"]]
    assert rows == [
        (1, "fast", 10_000, False),
        (1, "slow", 10_100, False),
        (3, "flashinfer_wrapper_abc123", 15_000, True),
    ]
    assert group["rows"][2]["timesVsFirst"] == pytest.approx(1.5)
    assert group["excluded"]["notPassed"] == 1
    floor = group["floor"]
    assert floor["bytes"] == 2 * (128 * 64 + 64 * 64 + 128 * 64)
    assert floor["flops"] == 2 * 128 * 64 * 64
    assert floor["recordAboveFloor"] == pytest.approx(10_000 / floor["floorNs"], rel=1e-3)
    assert all(row["belowFloor"] is False for row in group["rows"])


def test_leaderboard_workload_text(cli: RunCli, world: World, ranked: dict[str, StoredRecord]) -> None:
    result = cli("leaderboard", "gemm_n64_k64", "--workload", "m128", "--registry", world.registry.root)
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "comparison key sha256:" in text
    assert "record is" in text
    assert "× above it" in text
    assert "1=" in text  # fast and slow tie
    assert "stale" in text
    _lines_fit(text)


def test_below_floor_is_flagged_in_text(cli: RunCli, world: World, basic: dict[str, StoredRecord]) -> None:
    b = basic
    world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 3)  # floor is 8.5 ns
    world.commit("impossible")
    result = cli("leaderboard", "gemm_n64_k64", "--workload", "m128", "--registry", world.registry.root)
    assert result.exit_code == 0, result.output
    assert "BELOW FLOOR" in result.stdout
    summary = cli("leaderboard", "gemm_n64_k64", "--registry", world.registry.root)
    row = next(line for line in summary.stdout.splitlines() if line.startswith("  m128 "))
    assert row.split()[-1] == "BELOW"
    assert "BELOW: the record is faster than its physical floor" in summary.stdout


def test_leaderboard_empty_workload_board_is_an_empty_list(
    cli: RunCli, world: World, basic: dict[str, StoredRecord]
) -> None:
    world.commit("no runs")
    result = cli("leaderboard", "gemm_n64_k64", "--workload", "m1", "--registry", world.registry.root, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == []


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["leaderboard", "gemm_n46_k64"], 3, "no definition named or digested 'gemm_n46_k64'"),
        (["leaderboard", "gemm_n64_k64", "--workload", "m129"], 3, "no workload named or digested 'm129'"),
        (["leaderboard", "gemm_n64_k64", "--gpu", "H2O0"], 2, "unknown GPU 'H2O0'"),
        (["leaderboard", "gemm_n64_k64", "--evidence", "certain"], 2, "unknown evidence level 'certain'"),
        (["diff", "HEAD~9", "HEAD"], 3, "'HEAD~9' is neither a record of the registry nor a git revision"),
        (["history", "no_such_thing"], 3, "no record named or digested 'no_such_thing'"),
        (["cite", "deadbeefdeadbeef"], 3, "no record named or digested 'deadbeefdeadbeef'"),
        (["cite", "gemm_n64_k64", "--format", "apa"], 2, "unknown format 'apa'"),
    ],
)
def test_bad_input_exit_codes(
    cli: RunCli, world: World, ranked: dict[str, StoredRecord], args: list[str], code: int, message: str
) -> None:
    result = cli(*args, "--registry", world.registry.root)
    assert result.exit_code == code, result.output
    assert result.stderr.startswith(f"error: {message}"), result.stderr
    assert "Traceback" not in result.output


def test_diff_mixing_a_record_and_a_revision_is_a_usage_error(
    cli: RunCli, world: World, ranked: dict[str, StoredRecord]
) -> None:
    result = cli("diff", ranked["run_fast_m128"].digest, "HEAD", "--registry", world.registry.root)
    assert result.exit_code == 2, result.output


def test_diff_two_runs(cli: RunCli, world: World, ranked: dict[str, StoredRecord]) -> None:
    a, b = ranked["run_fast_m128"].digest, ranked["run_fi_m128"].digest
    result = cli("diff", a[:16], b, "--registry", world.registry.root, "--json")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert (doc["type"], doc["equal"], doc["sameGroup"]) == ("records", False, True)
    assert doc["latencyRatio"] == pytest.approx(1.5)
    assert doc["exceedsNoise"] is True
    change = next(c for c in doc["changes"] if c["path"] == "$.spec.timing.latencyNs.median")
    assert (change["before"], change["after"]) == (10_000, 15_000)
    text = cli("diff", a, ranked["run_slow_m128"].digest, "--registry", world.registry.root)
    assert text.exit_code == 1
    assert "within the noise: a tie" in text.stdout
    _lines_fit(text.stdout)
    same = cli("diff", a, a, "--registry", world.registry.root)
    assert same.exit_code == 0, same.output
    assert "the same record" in same.stdout


def test_diff_of_two_runs_says_the_key_comparison_first_and_hides_samples(
    cli: RunCli, world: World, basic: dict[str, StoredRecord]
) -> None:
    """Issue 13: `diff` of two runs printed 300 sample lines before the one line that matters."""
    b = basic
    a = world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 10_000, samples=range(9_005, 11_005, 10))
    c = world.run(b["m128"], b["slow"], b["protocol"], b["h200"], 20_000, samples=range(19_005, 21_005, 10))
    other = world.protocol(family="kictl-cpu-perf-counter")
    d = world.run(b["m128"], b["slow"], other, b["h200"], 20_000)
    world.commit("runs with samples")
    result = cli("diff", a.digest, c.digest, "--registry", world.registry.root)
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "median 10.0 µs → 20.0 µs: b/a 2.0000 (exceeds the noise); same comparison group"
    assert not [line for line in lines if "samples[" in line]
    assert "$.spec.timing.samples: 200 sample(s) differ (--samples lists them)" in lines
    assert len(lines) < 20
    _lines_fit(result.stdout)
    full = cli("diff", a.digest, c.digest, "--samples", "--registry", world.registry.root)
    assert len([line for line in full.stdout.splitlines() if "$.spec.timing.samples[" in line]) == 200
    assert full.stdout.splitlines()[0] == lines[0]
    apart = cli("diff", a.digest, d.digest, "--registry", world.registry.root)
    first = apart.stdout.splitlines()[0]
    assert first == "median 10.0 µs → 20.0 µs: not compared, different comparison groups (other protocol family)"
    doc = json.loads(cli("diff", a.digest, d.digest, "--registry", world.registry.root, "--json").stdout)
    assert doc["groupDifferences"] == ["protocol family"]
    assert doc["latencyNs"] == {"before": 10_000, "after": 20_000}
    doc = json.loads(cli("diff", a.digest, c.digest, "--registry", world.registry.root, "--json").stdout)
    assert len([c for c in doc["changes"] if "samples[" in c["path"]]) == 200  # JSON keeps every change


def test_diff_over_two_revisions(cli: RunCli, world: World, basic: dict[str, StoredRecord]) -> None:
    b = basic
    world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 10_000)
    world.run(b["m128"], b["slow"], b["protocol"], b["h200"], 12_000)
    old = world.run(b["m128"], b["reference"], b["protocol"], b["h200"], 20_000, observed=days_ago(380))
    world.commit("first runs", when=NOW - timedelta(days=30))  # the old run was 350 days old then
    new = world.run(b["m128"], b["flashinfer"], b["protocol"], b["h200"], 8_000)
    world.commit("a faster run", when=NOW)
    result = cli("diff", "HEAD~1", "HEAD", "--registry", world.registry.root, "--json")
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert doc["type"] == "revisions"
    assert doc["added"] == [{"kind": "BenchmarkRun", "digest": new.digest, "name": new.name}]
    assert doc["removed"] == []
    (group,) = doc["groups"]
    assert group["newFirst"] is True
    assert group["before"]["implementation"] == "fast"
    assert group["after"]["implementation"] == "flashinfer_wrapper_abc123"
    assert group["margin"] == pytest.approx(10_000 / 8_000)
    ranks = {c["implementation"]: (c["beforeRank"], c["afterRank"]) for c in group["rankChanges"]}
    assert ranks == {"fast": (1, 2), "slow": (2, 3), "reference": (3, 4), "flashinfer_wrapper_abc123": (None, 1)}
    assert [s["run"] for s in group["becameStale"]] == [old.digest]
    text = cli("diff", "HEAD~1", "HEAD", "--registry", world.registry.root)
    assert "new #1: flashinfer_wrapper_abc123 8.00 µs" in text.stdout
    assert "was: fast 10.0 µs; 1.250× faster" in text.stdout
    assert "became stale: reference" in text.stdout
    _lines_fit(text.stdout)
    equal = cli("diff", "HEAD", "HEAD", "--registry", world.registry.root, "--json")
    assert equal.exit_code == 0, equal.output
    assert json.loads(equal.stdout)["equal"] is True


def test_history_across_commits(cli: RunCli, world: World, basic: dict[str, StoredRecord]) -> None:
    b = basic
    world.run(b["m128"], b["slow"], b["protocol"], b["h200"], 12_000)
    first = world.commit("first", when=NOW - timedelta(days=3))
    fast = world.run(b["m128"], b["fast"], b["protocol"], b["h200"], 10_000)
    second = world.commit("second", when=NOW - timedelta(days=2))
    world.run(b["m128"], b["slow"], b["protocol"], b["h200"], 11_000)
    world.commit("third", when=NOW - timedelta(days=1))
    pending = world.run(b["m128"], b["flashinfer"], b["protocol"], b["h200"], 5_000)
    world.add()  # not committed
    result = cli("history", "gemm_n64_k64", "--registry", world.registry.root, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert (doc["kind"], doc["name"]) == ("Definition", "gemm_n64_k64")
    entries = {e["digest"]: e for e in doc["entries"]}
    assert entries[b["definition"].digest]["commit"] == first
    assert entries[fast.digest]["commit"] == second
    assert entries[fast.digest]["author"] == "Test Author"
    assert entries[pending.digest]["commit"] is None
    (group,) = doc["groups"]
    leaders = [(c["implementation"], c["commit"], c["previousImplementation"]) for c in group["firstOverTime"]]
    assert leaders == [
        ("slow", first, None),
        ("fast", second, "slow"),
        ("flashinfer_wrapper_abc123", None, "fast"),
    ]
    text = cli("history", "fast", "--registry", world.registry.root)
    assert text.exit_code == 0, text.output
    assert "#1 over time:" in text.stdout
    _lines_fit(text.stdout)


def test_cite_formats(cli: RunCli, world: World, ranked: dict[str, StoredRecord]) -> None:
    run = ranked["run_fast_m128"]
    head = world.registry.git.head()
    result = cli("cite", run.digest[:20], "--format", "json", "--registry", world.registry.root)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["digest"] == run.digest
    assert doc["permalink"] is None  # `kictl init` gives no permalink base (issue 45): the registry's place instead
    assert doc["location"] == str(world.registry.root.resolve())
    assert doc["commit"] == head
    assert doc["title"].startswith("KernelIndex run: fast on gemm_n64_k64/m128, H200")
    assert len(doc["accessed"]) == 10
    bib = cli("cite", run.digest, "--format", "bibtex", "--registry", world.registry.root)
    assert bib.exit_code == 0, bib.output
    assert bib.stdout.startswith("@misc{kernelindex_" + run.digest[7:19] + ",")
    assert "howpublished = {KernelIndex registry at /" in bib.stdout  # no permalink base: the registry's folder
    assert f"records/BenchmarkRun/{run.digest[7:9]}/{run.digest[7:]}.json)}}," in bib.stdout
    assert "gemm\\_n64\\_k64" in bib.stdout  # LaTeX specials escaped
    text = cli("cite", "gemm_n64_k64", "--registry", world.registry.root)
    assert text.exit_code == 0, text.output
    assert '"GEMM gemm_n64_k64". KernelIndex Definition' in text.stdout
    assert head is not None
    assert head[:12] in text.stdout


def test_cite_json_is_format_json(cli: RunCli, world: World, ranked: dict[str, StoredRecord]) -> None:
    """Issue 13: every read command has --json; cite had only --format json."""
    run = ranked["run_fast_m128"]
    as_json = cli("cite", run.digest, "--json", "--registry", world.registry.root)
    assert as_json.exit_code == 0, as_json.output
    as_format = cli("cite", run.digest, "--format", "json", "--registry", world.registry.root)
    assert json.loads(as_json.stdout) == json.loads(as_format.stdout)
    both = cli("cite", run.digest, "--json", "--format", "json", "--registry", world.registry.root)
    assert both.exit_code == 0, both.output
    clash = cli("cite", run.digest, "--json", "--format", "bibtex", "--registry", world.registry.root)
    assert clash.exit_code == 2, clash.output
    assert "give one" in clash.stderr


def test_cite_uses_the_policy_permalink_base(cli: RunCli, world: World, ranked: dict[str, StoredRecord]) -> None:
    policy = json.loads(world.registry.policy_path.read_bytes())
    policy["permalinkBase"] = "https://example.org/k/"
    world.registry.policy_path.write_bytes(pretty_bytes(policy))
    result = cli("cite", "gemm_n64_k64", "--format", "json", "--registry", world.registry.root)
    assert json.loads(result.stdout)["permalink"] == "https://example.org/k/" + ranked["definition"].digest


def test_records_added_with_kictl_add_are_ranked_before_commit(
    cli: RunCli, world: World, basic: dict[str, StoredRecord], tmp_path: Path
) -> None:
    world.commit("base records")
    cli("leaderboard", "gemm_n64_k64", "--registry", world.registry.root)  # builds the index
    b = basic
    run = world.run(b["m1"], b["slow"], b["protocol"], b["h200"], 4_000)
    world._pending.clear()  # stored through the CLI instead
    manifest = tmp_path / "run.json"
    manifest.write_bytes(pretty_bytes(run.raw))
    added = cli("add", manifest, "--registry", world.registry.root)
    assert added.exit_code == 0, added.output
    result = cli("leaderboard", "gemm_n64_k64", "--workload", "m1", "--registry", world.registry.root, "--json")
    (group,) = json.loads(result.stdout)
    assert [(r["implementation"], r["committed"]) for r in group["rows"]] == [("slow", False)]


def test_leaderboard_never_imports_torch(world: World, ranked: dict[str, StoredRecord]) -> None:
    root = str(world.registry.root)
    program = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from kictl.cli import make_app\n"
        f"for extra in ([], ['--workload', 'm128']):\n"
        f"    args = ['leaderboard', 'gemm_n64_k64', '--registry', {root!r}, *extra]\n"
        "    result = CliRunner().invoke(make_app(), args)\n"
        "    assert result.exit_code == 0, result.output\n"
        "print('torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("nanoseconds", "text"),
    [(None, "-"), (7, "7.00 ns"), (812, "812 ns"), (9_000, "9.00 µs"), (10_100, "10.1 µs"), (192_400, "192 µs"),
     (1_940_000, "1.94 ms"), (2_100_000_000, "2.10 s")],
)  # fmt: skip
def test_latency_keeps_three_significant_digits(nanoseconds: int | None, text: str) -> None:
    from kictl.render import latency

    assert latency(nanoseconds) == text


def test_long_names_fit_a_100_column_terminal_and_stay_whole_off_one(
    cli: RunCli, world: World, basic: dict[str, StoredRecord], monkeypatch: pytest.MonkeyPatch
) -> None:
    b = basic
    definition = b["definition"]
    workload = world.workload(definition, "0f7c1e2a-9b3d-4c5e-8f6a-7b8c9d0e1f2a", 64)
    long_a = world.implementation(definition, "triton_autotuned_split_k_persistent_gemm_" + "x" * 40)
    long_b = world.implementation(definition, "flashinfer_wrapper_with_a_very_long_name_" + "y" * 40)
    world.run(workload, long_a, b["protocol"], b["h200"], 3, observed=days_ago(400))  # below floor and stale
    world.run(workload, long_b, b["protocol"], b["h200"], 3)
    world.commit("long names")
    world.run(workload, b["slow"], b["protocol"], b["h200"], 4)
    world.add()  # uncommitted
    root = world.registry.root
    for args in (
        ("leaderboard", "gemm_n64_k64"),
        ("leaderboard", "gemm_n64_k64", "--workload", "0f7c1e2a-9b3d"),
        ("history", "gemm_n64_k64"),
        ("diff", "HEAD~1", "HEAD"),
        ("floor", "gemm_n64_k64", "--gpu", "H100 PCIe"),
    ):
        whole = cli(*args, "--registry", root)  # stdout is no terminal here: nothing is cut (issue 30)
        assert whole.exit_code in (0, 1), whole.output
        if args[0] != "floor":
            assert "triton_autotuned_split_k_persistent_gemm_" + "x" * 40 in whole.stdout, args
        with monkeypatch.context() as terminal:  # a terminal of 100 columns: names are cut to fit it
            terminal.setattr("kictl.render.terminal_width", lambda: 100)
            result = cli(*args, "--registry", root)
        assert result.exit_code in (0, 1), result.output
        _lines_fit(result.stdout)
    workload_view = cli("leaderboard", "gemm_n64_k64", "--workload", "0f7c1e2a-9b3d", "--registry", root).stdout
    assert "* not committed yet" in workload_view
    assert "BELOW FLOOR" in workload_view


def test_a_registry_without_git_still_ranks(
    cli: RunCli, world: World, ranked: dict[str, StoredRecord], tmp_path: Path
) -> None:
    import shutil

    plain = tmp_path / "plain"
    shutil.copytree(world.registry.root / "registry", plain / "registry")
    result = cli("leaderboard", "gemm_n64_k64", "--workload", "m128", "--registry", plain, "--json")
    assert result.exit_code == 0, result.output
    (group,) = [g for g in json.loads(result.stdout) if g["gpu"] == "H200"]
    assert [row["implementation"] for row in group["rows"]] == ["fast", "slow", "flashinfer_wrapper_abc123"]
    assert not any(row["committed"] for row in group["rows"])
    history = cli("history", "gemm_n64_k64", "--registry", plain, "--json")
    assert history.exit_code == 0, history.output
    assert all(entry["commit"] is None for entry in json.loads(history.stdout)["entries"])
    revisions = cli("diff", "HEAD~1", "HEAD", "--registry", plain)
    assert revisions.exit_code == 3, revisions.output

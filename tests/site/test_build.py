"""``kictl site build`` without a browser: the JSON beside each page is the CLI's, defects are marked,
rebuilds are byte-identical and ``--incremental`` renders only what changed."""

from __future__ import annotations

import copy
import filecmp
import json
import re
import shutil
from pathlib import Path

import pytest

from kictl.index.query import QueryIndex
from kictl.records import record_from_value
from kictl.site import build_site
from kictl.store.registry import Registry
from tests.conftest import RunCli
from tests.site.conftest import (
    DEFINITION,
    TAMPERED_DEFINITION,
    UNSIGNED_DEFINITION,
    SiteWorld,
    add_unsigned_run,
    commit_all,
    read_json,
)


def cli_json(cli: RunCli, *args: str, code: int = 0) -> object:
    result = cli(*args, "--json")
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


def page_of(out: Path, path: str) -> str:
    return (out / path).read_text(encoding="utf-8")


def test_every_definition_page_has_the_cli_leaderboard_floor_and_history(site_world: SiteWorld, cli: RunCli) -> None:
    root = str(site_world.registry.root)
    with QueryIndex.open(site_world.registry) as index:
        names = [definition.name for definition in index.definitions()]
    assert DEFINITION in names
    marked = 0  # the site hands its boards the advisory marks it judged once: they must be the CLI's
    for name in names:
        folder = site_world.out / "d" / name
        board = read_json(folder / "leaderboard.json")
        assert board == cli_json(cli, "leaderboard", name, "--registry", root)
        assert isinstance(board, dict)
        marked += sum(1 for each in board["boards"] for record in each["records"] if record["advisories"])
        assert read_json(folder / "history.json") == cli_json(cli, "history", name, "--registry", root)
    assert marked > 0
    floor = read_json(site_world.out / "d" / DEFINITION / "floor.h200.json")
    assert floor == cli_json(cli, "floor", DEFINITION, "--gpu", "H200", "--registry", root)


def test_group_page_json_is_the_element_of_the_workload_leaderboard(site_world: SiteWorld, cli: RunCli) -> None:
    root = str(site_world.registry.root)
    board = read_json(site_world.out / "d" / DEFINITION / "leaderboard.json")
    assert isinstance(board, dict)
    records = [record for each in board["boards"] for record in each["records"]]
    marked = next(record for record in records if record["advisories"])  # a group whose rows carry marks too
    for record in (records[0], marked):
        groups = cli_json(cli, "leaderboard", DEFINITION, "--workload", record["workloadName"], "--registry", root)
        assert isinstance(groups, list)
        (expected,) = [group for group in groups if group["comparisonKey"] == record["comparisonKey"]]
        key_hex = record["comparisonKey"].removeprefix("sha256:")
        assert read_json(site_world.out / "g" / key_hex / "leaderboard.json") == expected


def _marked_run(out: Path) -> str:
    """A run whose page cites a harness advisory (the bundled registry's advisories mark some of its runs)."""
    for cite in sorted(out.glob("r/*/cite.json")):
        cited = read_json(cite)
        assert isinstance(cited, dict)
        if cited["advisories"]:
            return cite.parent.name
    raise AssertionError("no run page cites an advisory")


def test_run_page_json_is_what_verify_and_cite_print(site_world: SiteWorld, cli: RunCli) -> None:
    """A run page's JSON is what the commands print, for an ordinary run, an unsigned one and one an advisory marks
    (the site hands ``citation`` its own report and marks: they must be what ``kictl cite`` finds alone)."""
    root = str(site_world.registry.root)
    for digest in (site_world.ordinary, site_world.unsigned, _marked_run(site_world.out)):
        folder = site_world.out / "r" / digest
        assert read_json(folder / "verify.json") == cli_json(cli, "verify", digest, "--registry", root)
        shown = read_json(folder / "show.json")
        assert shown == cli_json(cli, "show", digest, "--registry", root)
        result = cli("cite", digest, "--format", "json", "--registry", root)
        cited = json.loads(result.stdout)
        page_cite = read_json(folder / "cite.json")
        assert isinstance(page_cite, dict)
        assert {k: v for k, v in page_cite.items() if k != "accessed"} == {
            k: v for k, v in cited.items() if k != "accessed"
        }
    result = cli("cite", site_world.ordinary, "--format", "json", "--registry", root)
    cited = json.loads(result.stdout)
    policy = json.loads((site_world.registry.root / "registry" / "policy.json").read_text())
    assert cited["permalink"] == policy["permalinkBase"] + site_world.ordinary
    assert cited["permalink"].endswith(f"/r/{site_world.ordinary}")  # the page's own path


def test_tampered_run_is_left_out_everywhere(site_world: SiteWorld, cli: RunCli) -> None:
    """A run whose file no longer matches its digest is never shown as a record (as no reader shows it)."""
    root = str(site_world.registry.root)
    verified = cli_json(cli, "verify", site_world.tampered, "--registry", root, code=1)
    assert isinstance(verified, dict)
    assert verified["ok"] is False
    assert not (site_world.out / "r" / site_world.tampered).exists()
    board = read_json(site_world.out / "d" / TAMPERED_DEFINITION / "leaderboard.json")
    assert isinstance(board, dict)
    assert not [r for b in board["boards"] for r in b["records"] if r["run"] == site_world.tampered]
    for page in site_world.out.rglob("*.html"):
        assert site_world.tampered not in page.read_text(encoding="utf-8"), page


def test_unsigned_run_is_marked(site_world: SiteWorld) -> None:
    html = page_of(site_world.out, f"r/{site_world.unsigned}/index.html")
    assert "<h2>Unsigned</h2>" in html
    verify = read_json(site_world.out / "r" / site_world.unsigned / "verify.json")
    assert isinstance(verify, dict)
    assert verify["submitted"] is False
    key = read_json(site_world.out / "r" / site_world.unsigned / "show.json")
    assert isinstance(key, dict)
    ordinary_html = page_of(site_world.out, f"r/{site_world.ordinary}/index.html")
    assert "Unsigned" not in ordinary_html
    assert "fails verification</span>" not in ordinary_html
    groups = [p for p in (site_world.out / "g").glob("*/index.html") if site_world.unsigned in p.read_text()]
    assert groups
    assert all(">unsigned<" in p.read_text() for p in groups)
    assert UNSIGNED_DEFINITION in page_of(site_world.out, f"r/{site_world.unsigned}/index.html")


def test_index_json_is_definitions_list(site_world: SiteWorld, cli: RunCli) -> None:
    expected = cli_json(cli, "definitions", "list", "--registry", str(site_world.registry.root))
    assert isinstance(expected, list)
    found = read_json(site_world.out / "index.json")
    assert isinstance(found, list)
    key = lambda row: row["digest"]  # noqa: E731
    assert sorted(found, key=key) == sorted(expected, key=key)


def test_pages_need_no_script_and_no_other_host(site_world: SiteWorld) -> None:
    for page in site_world.out.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert "<script" not in text
        assert not re.search(r'(?:src|href)="(?:https?:)?//', text.replace('href="https://kernelindex.dev/r/', "")), (
            page
        )
        assert '<html lang="en">' in text
        assert "<h1>" in text
    for svg in site_world.out.rglob("*.svg"):
        assert "<script" not in svg.read_text(encoding="utf-8")


def test_cli_build_reports_and_rejects_a_file_as_output(site_world: SiteWorld, cli: RunCli, tmp_path: Path) -> None:
    target = tmp_path / "a-file"
    target.write_text("x")
    result = cli("site", "build", target, "--registry", site_world.registry.root)
    assert result.exit_code == 2, result.output
    result = cli("site", "serve", tmp_path / "nothing-built")
    assert result.exit_code == 2, result.output
    assert "build it first" in result.output


@pytest.mark.slow
def test_rebuild_is_byte_identical_and_incremental_renders_only_what_changed(
    site_world: SiteWorld, tmp_path: Path, cli: RunCli
) -> None:
    """Two full builds and an incremental one between them (a full build takes seconds: not three of them).

    The registry is a copy of the session's (its files and git history; a run page's ``cite.json`` names the
    registry's folder, so a build of the copy is compared with builds of the copy only).  The incremental
    build re-renders only the pages the new run changed and keeps the first build's files for the rest, so
    comparing its folder with the second full build compares two independent renderings of every page:
    the first build's bytes for the unchanged pages, the incremental's for the changed ones.
    """
    registry = Registry(shutil.copytree(site_world.registry.root, tmp_path / "registry", symlinks=True))
    out = tmp_path / "out"
    first = build_site(registry, out)
    assert first.rendered == first.pages == site_world.report.pages
    # a commit that adds one run: an incremental build renders a few pages and ends where a full build ends
    with QueryIndex.open(registry) as index:
        template = next(
            run
            for run in index.runs_of_definition(index.resolve_definition(DEFINITION).digest)
            if run.status == "passed"
        )
    added = add_unsigned_run(registry, template, observed_at="2026-11-30T13:00:00.000Z", factor=0.5)
    commit_all(registry.root, "one more run")
    result = cli("site", "build", out, "--incremental", "--json", "--registry", registry.root)
    assert result.exit_code == 0, result.output
    incremental = json.loads(result.stdout)
    assert incremental["mode"] == "incremental"
    assert incremental["verified"] == 1  # only the new run; every other run's files are unchanged
    assert 0 < incremental["rendered"] < incremental["pages"] // 3
    assert incremental["pages"] == first.pages + 1  # the new run's page
    assert (out / "r" / added / "index.html").is_file()
    full = build_site(registry, tmp_path / "full")
    assert full.rendered == full.pages == incremental["pages"]
    assert _differences(filecmp.dircmp(out, tmp_path / "full")) == [], "a second build differs"


def _differences(comparison: filecmp.dircmp[str]) -> list[str]:
    """Files that are not in both trees or differ in their bytes."""
    found = [f"{comparison.left}: only {name}" for name in comparison.left_only + comparison.right_only]
    _, mismatch, errors = filecmp.cmpfiles(comparison.left, comparison.right, comparison.common_files, shallow=False)
    found.extend(f"{comparison.left}/{name}" for name in mismatch + errors)
    for sub in comparison.subdirs.values():
        found.extend(_differences(sub))
    return found


def test_serve_answers_on_loopback(site_world: SiteWorld) -> None:
    """`kictl site serve SITE --port 0` serves the built folder on 127.0.0.1 until stopped."""
    import subprocess
    import sys
    import urllib.request

    process = subprocess.Popen(
        [sys.executable, "-m", "kictl", "site", "serve", str(site_world.out), "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert found, line
        with urllib.request.urlopen(f"http://127.0.0.1:{found.group(1)}/d/{DEFINITION}/leaderboard.json") as answer:
            assert json.loads(answer.read()) == read_json(site_world.out / "d" / DEFINITION / "leaderboard.json")
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_the_front_page_leads_with_the_definitions_and_their_best_results(site_world: SiteWorld) -> None:
    html = page_of(site_world.out, "index.html")
    definitions = html.index('id="definitions"')
    assert definitions < html.index('id="latest"') < html.index('id="counts"')
    assert "best results" in html[definitions:]
    # the definition of the tampered run is still led by the FlashInfer wrapper, on the H200
    row = html[html.index(f">{DEFINITION}<") :]
    row = row[: row.index("</tr>")]
    assert "<b>H200</b>" in row
    assert "flashinfer_wrapper" in row
    assert re.search(r"\(\d+ of \d+ records", row)


def _per_gpu_items(out: Path, name: str) -> dict[str, str]:
    page = page_of(out, f"d/{name}/index.html")
    start = page.index('id="per-gpu"')
    section = page[start : page.index("</section>", start)]
    return dict(re.findall(r"<li><strong>(.*?)</strong>: (.*?)</li>", section))


def test_each_definition_page_says_per_gpu_what_it_holds_and_not_measured_only_where_true(
    site_world: SiteWorld,
) -> None:
    """Issue 43: the pages show what is known per GPU product. For every product the registry holds passed runs on,
    a definition page links its boards there or says "not measured on" it, and says so only where no run of that
    definition passed there (the bundled registry: three definitions on the H200 and the H100, two on the H100
    only)."""
    with QueryIndex.open(site_world.registry) as index:
        passed = [run for run in index.all_runs() if run.status == "passed" and run.gpu]
        names = {d.digest: d.name for d in index.definitions()}
    gpus = sorted({run.gpu for run in passed if run.gpu})
    on = {(names[run.definition], run.gpu) for run in passed if run.definition}
    said = {name: _per_gpu_items(site_world.out, name) for name in names.values()}
    for name, items in said.items():
        assert sorted(items) == gpus, name
        for gpu, text in items.items():
            if (name, gpu) in on:
                assert "not measured" not in text, (name, gpu)
                assert 'href="#board-' in text or "none on a board here" in text, (name, gpu)
            else:
                assert text == f"not measured on {gpu}", (name, gpu)
    texts = [text for items in said.values() for text in items.values()]
    assert any(text.startswith("not measured on") for text in texts)  # both cases are met
    assert any("records on" in text for text in texts)


def test_a_first_run_on_a_new_gpu_product_renders_every_definition_page_again(
    site_world: SiteWorld, tmp_path: Path
) -> None:
    """Every definition page's Per GPU list names the products any definition has a passed run on: an incremental
    build after the registry's first run on a new product renders them all again (each now says "not measured on"
    it but the one measured there), and ends where a full build ends."""
    registry = Registry(shutil.copytree(site_world.registry.root, tmp_path / "registry", symlinks=True))
    out = tmp_path / "out"
    with QueryIndex.open(registry) as index:
        definition = index.resolve_definition(DEFINITION)
        template = next(run for run in index.runs_of_definition(definition.digest) if run.status == "passed")
        names = [d.name for d in index.definitions()]
    # the machine's record first, built: the products the environments name change then, not the measured ones
    environment = copy.deepcopy(registry.load(template.environment).raw)
    environment["metadata"]["name"] = "a-b200-node"
    environment["spec"]["hardware"]["product"] = "B200"
    (stored,) = registry.add([record_from_value(environment)])
    commit_all(registry.root, "a B200 node")
    build_site(registry, out)
    assert all("B200" not in _per_gpu_items(out, name) for name in names)
    raw = copy.deepcopy(registry.load(template.digest).raw)
    raw["metadata"] = {"name": raw["metadata"]["name"] + ".b200"}
    raw["spec"]["environmentDigest"] = stored.record.digest
    raw["spec"]["timing"].pop("samples", None)
    (run,) = registry.add([record_from_value(raw)])
    commit_all(registry.root, "the first run on a B200")
    report = build_site(registry, out, incremental=True)
    assert report.rendered >= len(names)
    for name in names:
        text = _per_gpu_items(out, name)["B200"]
        assert ("records on" in text) if name == DEFINITION else (text == "not measured on B200"), (name, text)
    build_site(registry, tmp_path / "full")
    assert _differences(filecmp.dircmp(out, tmp_path / "full")) == [], "the incremental build differs from a full one"
    assert (out / "r" / run.record.digest / "index.html").is_file()

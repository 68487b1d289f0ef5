"""The built site in a real browser: Debian's headless Chromium driven by Playwright for Python.

The site is served from 127.0.0.1 by the standard library's http.server;
the browser runs with JavaScript off and every request to another host
aborted (and counted: the site must make none).  Skipped when Chromium
(``/usr/bin/chromium``, or ``$KICTL_CHROMIUM``) or Playwright is absent;
``.ci/run`` installs both, so CI runs these tests.  No browser is downloaded.

Screenshots of three pages go to ``$KICTL_TEST_ARTIFACTS`` (else a temporary
folder); with ``KICTL_UPDATE_SCREENSHOTS=1`` they also replace the ones in
``docs/screenshots/``.
"""

from __future__ import annotations

import functools
import html.parser
import http.server
import json
import os
import shutil
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kictl import canon
from kictl.site.html import latency
from tests.conftest import REPO_ROOT, RunCli
from tests.site.conftest import DEFINITION, SiteWorld

CHROMIUM = os.environ.get("KICTL_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

if not Path(CHROMIUM).is_file():
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright for Python is not installed")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture(scope="module")
def served(site_world: SiteWorld) -> Iterator[str]:
    """The site on http://127.0.0.1:PORT/."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site_world.out)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class Browser:
    def __init__(self, context: Any, blocked: list[str]) -> None:
        self.context = context
        self.blocked = blocked

    def open(self, url: str) -> Any:
        page = self.context.new_page()
        response = page.goto(url)
        assert response is not None, url
        assert response.status == 200, url
        return page


@pytest.fixture(scope="module")
def browser(served: str) -> Iterator[Browser]:
    blocked: list[str] = []
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        context = chromium.new_context(java_script_enabled=False, viewport={"width": 1200, "height": 900})

        def route(request_route: Any) -> None:
            host = urllib.parse.urlsplit(request_route.request.url).hostname
            if host == "127.0.0.1":
                request_route.continue_()
            else:
                blocked.append(request_route.request.url)
                request_route.abort()

        context.route("**/*", route)
        try:
            yield Browser(context, blocked)
        finally:
            context.close()
            chromium.close()
    assert blocked == [], f"the site asked for other hosts: {blocked[:5]}"


def _cells(row: Any) -> list[str]:
    return [text.strip() for text in row.locator("th, td").all_inner_texts()]


def test_definition_page_shows_what_leaderboard_json_says(
    site_world: SiteWorld, served: str, browser: Browser, cli: RunCli
) -> None:
    root = str(site_world.registry.root)
    result = cli("leaderboard", DEFINITION, "--registry", root, "--json")
    assert result.exit_code == 0, result.output
    board = json.loads(result.stdout)
    page = browser.open(f"{served}d/{DEFINITION}/")
    assert page.locator("h1").inner_text() == DEFINITION
    # the H200 latency board (the bundled registry also holds H100 latency and energy boards since 2026-12-06)
    number_of = {id(b): n for n, b in enumerate(board["boards"], start=1)}
    section = next(
        b for b in board["boards"] if b["gpu"] == "H200" and "energy" not in b.get("comparabilityFamily", "")
    )
    rows = page.locator(f"#records-{number_of[id(section)]} tbody tr")
    assert rows.count() == len(section["records"])
    for number, record in enumerate(section["records"]):
        workload, shown_latency, holder, evidence, *_ = _cells(rows.nth(number))
        assert workload == record["workloadName"]
        assert shown_latency == latency(record["latencyNs"])
        assert holder.startswith(record["implementation"])  # the #1
        assert record["evidence"] in evidence
        # the group's ranked list on the same page: rank, latency and × vs #1 of every row
        ranked = cli("leaderboard", DEFINITION, "--workload", record["workloadName"], "--registry", root, "--json")
        (group,) = [g for g in json.loads(ranked.stdout) if g["comparisonKey"] == record["comparisonKey"]]
        caption = f"Ranking of {record['workloadName']} on {section['gpu']}"
        table = page.locator("table", has=page.locator("caption", has_text=caption))
        shown = [_cells(row) for row in table.locator("tbody tr").all()]
        assert len(shown) == len(group["rows"])
        for cells, expected in zip(shown, group["rows"], strict=True):
            assert cells[0].rstrip("=") == str(expected["rank"])
            assert cells[1] == expected["implementation"]
            assert cells[2] == latency(expected["latencyNs"])
            assert cells[3] == f"{expected['timesVsFirst']:.2f}×"
            assert expected["evidence"] in cells[5]
        assert shown[0][1] == record["implementation"]
        assert shown[0][3] == "1.00×"
    assert page.locator("img[alt]").count() >= 2  # the plots, each with a text alternative
    assert all(alt.strip() for alt in page.locator("img").evaluate_all("els => els.map(e => e.alt)"))


def test_run_page_shows_digest_manifest_that_recomputes_and_citation(
    site_world: SiteWorld, served: str, browser: Browser, cli: RunCli
) -> None:
    digest = site_world.ordinary
    page = browser.open(f"{served}r/{digest}/")
    text = page.locator("main").inner_text()
    assert digest in text
    page.locator("#manifest-h ~ details summary").click()
    manifest = json.loads(page.locator("#manifest").inner_text())
    assert digest in manifest
    assert len(manifest) >= 5
    for key, record in manifest.items():
        assert canon.record_digest(record) == key
    citation = page.locator("#citation").inner_text()
    cited = cli("cite", digest, "--format", "json", "--registry", str(site_world.registry.root))
    expected = json.loads(cited.stdout)
    assert expected["permalink"] in citation
    assert expected["title"] in citation
    assert digest in citation
    assert urllib.parse.urlsplit(expected["permalink"]).path == f"/r/{digest}"  # this page's path
    assert page.locator(".alert").count() == 0


def test_unsigned_run_page_says_so(site_world: SiteWorld, served: str, browser: Browser) -> None:
    # (a tampered run has no page at all: tests/site/test_build.py::test_tampered_run_is_left_out_everywhere)
    page = browser.open(f"{served}r/{site_world.unsigned}/")
    assert "Unsigned" in page.locator(".alert").inner_text()


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if values.get("id"):
            self.ids.add(str(values["id"]))
        for name in ("href", "src"):
            if values.get(name) and (tag != "a" or name == "href"):
                self.links.append(str(values[name]))


def _get(url: str, method: str = "GET") -> bytes:
    """The body of ``url`` from the local server; fails the test unless it answers 200."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method)) as answer:
            assert answer.status == 200, url
            return bytes(answer.read())
    except urllib.error.HTTPError as exc:
        raise AssertionError(f"{url} answered {exc.code}") from exc


def test_every_internal_link_resolves(site_world: SiteWorld, served: str) -> None:
    """Crawl from the index page; every link and image to 127.0.0.1 answers 200, anchors exist, every page is reached.

    What is checked is the HTML the server sends, its links and its ids, so the pages are asked of the same
    server as the browser's with urllib: a browser visit per page cost about a minute and checked nothing more
    (what the browser shows is the other tests'; that no page asks another host is
    tests/site/test_build.py::test_pages_need_no_script_and_no_other_host, over every file, and the
    ``browser`` fixture's count of blocked requests for the pages the browser opens).
    """
    seen: set[str] = set()
    queue = [served]
    ids: dict[str, set[str]] = {}
    anchors: list[tuple[str, str, str]] = []
    files: set[str] = set()
    while queue:
        url = queue.pop()
        if url in seen:
            continue
        seen.add(url)
        parser = _Links()
        parser.feed(_get(url).decode("utf-8"))
        ids[url] = parser.ids
        for href in parser.links:
            target = urllib.parse.urljoin(url, href)
            parts = urllib.parse.urlsplit(target)
            if parts.hostname != "127.0.0.1":
                continue
            bare = urllib.parse.urlunsplit(parts._replace(fragment=""))
            if parts.fragment:
                anchors.append((url, bare, parts.fragment))
            if bare.endswith("/") or bare.endswith(".html"):
                queue.append(bare)
            else:
                files.add(bare)
    for target in sorted(files):  # JSON, SVG, the stylesheet: the server opens each to answer HEAD
        _get(target, "HEAD")
    for source, target, fragment in anchors:
        assert fragment in ids.get(target, set()), f"{source} links to a missing #{fragment} of {target}"
    pages = set(site_world.out.rglob("index.html"))
    assert len(seen) == len(pages), "some pages are not reachable from the index"


def test_screenshots(site_world: SiteWorld, served: str, browser: Browser, tmp_path: Path) -> None:
    """Three pages as PNG: the test's artifacts, and docs/screenshots/ on request."""
    folder = Path(os.environ.get("KICTL_TEST_ARTIFACTS") or tmp_path) / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    shots = {
        "index.png": (served, 1200),
        "definition.png": (f"{served}d/{DEFINITION}/", 1200),
        "run-phone.png": (f"{served}r/{site_world.ordinary}/", 390),
    }
    for name, (url, width) in shots.items():
        page = browser.open(url)
        page.set_viewport_size({"width": width, "height": 1100 if width > 500 else 844})
        page.screenshot(path=str(folder / name))
        assert (folder / name).stat().st_size > 10_000
    if os.environ.get("KICTL_UPDATE_SCREENSHOTS") == "1":
        docs = REPO_ROOT / "docs" / "screenshots"
        docs.mkdir(parents=True, exist_ok=True)
        for name in shots:
            shutil.copyfile(folder / name, docs / name)

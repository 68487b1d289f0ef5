"""``kictl site serve`` on a folder someone else made (an unpacked pull-request artifact) serves no file through a
link, nothing outside the folder, no folder listing, and forbids scripts and other hosts (issue 41)."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kictl.site.serve import CONTENT_SECURITY_POLICY, site_server

SECRET = "the maintainer's private key\n"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    tmp_path = tmp_path_factory.mktemp("serve")
    private = tmp_path / "home"
    (private / "ssh").mkdir(parents=True)
    (private / "ssh" / "id_ed25519").write_text(SECRET)
    site = tmp_path / "artifact" / "_site"
    (site / "d" / "x").mkdir(parents=True)
    (site / "index.html").write_text("<h1>index</h1>")
    (site / "d" / "x" / "index.html").write_text("<h1>x</h1>")
    (site / "d" / "bare").mkdir()
    (site / "d" / "bare" / "data.json").write_text("{}")
    (site / "key.txt").symlink_to(private / "ssh" / "id_ed25519")
    (site / "home").symlink_to(private, target_is_directory=True)
    (site / "d" / "up").symlink_to("../..", target_is_directory=True)
    server = site_server(site, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], private
    finally:
        server.shutdown()
        server.server_close()


def get(port: int, path: str) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path)  # the path as written: no client-side normalisation
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def test_pages_are_served_with_a_policy_that_runs_no_script(served: tuple[int, Path]) -> None:
    port, _ = served
    status, headers, body = get(port, "/")
    assert (status, body) == (200, b"<h1>index</h1>")
    assert headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert "default-src 'none'" in CONTENT_SECURITY_POLICY
    assert "script-src" not in CONTENT_SECURITY_POLICY  # so no script runs
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert get(port, "/d/x/")[0] == 200
    assert get(port, "/d/x")[0] == 301  # the folder's path with a slash
    assert get(port, "/d/bare/data.json")[0] == 200


@pytest.mark.parametrize(
    "path",
    [
        "/key.txt",
        "/home/ssh/id_ed25519",
        "/d/up/home/ssh/id_ed25519",
        "/../home/ssh/id_ed25519",
        "/%2e%2e/home/ssh/id_ed25519",
        "/d/x/%2e%2e/%2e%2e/key.txt",
        "/home/",
        "/d/bare/",  # no listing of a folder without index.html
        "/%ff",
    ],
)
def test_nothing_is_served_through_a_link_or_outside_the_folder(served: tuple[int, Path], path: str) -> None:
    port, _ = served
    status, _, body = get(port, path)
    assert status == 404, (path, status)
    assert SECRET.encode() not in body

"""``kictl site serve``: a built site on 127.0.0.1, safe to point at a folder someone else made (issue 41).

The folder may be an unpacked pull-request artifact, which the pull request's own code built.  A plain
``http.server`` follows links, so an artifact with ``key.txt -> ~/.ssh/id_ed25519`` serves the key, and a
page with a script could read it from the same origin and send it away.  This server:

* serves only regular files and folders reached from the site folder without a link (a link anywhere on
  the way is a 404, as is a path outside the folder);
* sends a Content-Security-Policy that runs no script and loads nothing from another host (kictl's own
  pages have no script and ask no other host), and ``X-Content-Type-Options: nosniff``;
* lists no folders (a folder without ``index.html`` is a 404).
"""

from __future__ import annotations

import functools
import http.server
import os
import stat
import urllib.parse
from pathlib import Path
from typing import Any

#: What a page may load: its own site's images and styles (SVG plots carry inline styles), nothing else.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)


def unlinked_path(root: Path, url_path: str) -> Path | None:
    """The file or folder that ``url_path`` names under ``root`` when no part of the way is a link (nor ``..``,
    nor anything but a folder or regular file); else ``None``."""
    try:
        path = urllib.parse.unquote(urllib.parse.urlsplit(url_path).path, errors="strict")
    except (UnicodeDecodeError, ValueError):
        return None
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if any(part == ".." or "\0" in part or "\\" in part for part in parts):
        return None
    current = root
    for part in parts:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except (OSError, ValueError):
            return None
        if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
            return None
    return current


class SiteHandler(http.server.SimpleHTTPRequestHandler):
    """``SimpleHTTPRequestHandler`` that serves only what ``unlinked_path`` allows, with a strict policy."""

    def __init__(self, *args: Any, directory: str, **kwargs: Any) -> None:
        super().__init__(*args, directory=directory, **kwargs)

    def send_head(self) -> Any:
        root = Path(self.directory)
        found = unlinked_path(root, self.path)
        if found is None:
            self.send_error(404, "File not found")
            return None
        if found.is_dir():
            if not self.path.split("?", 1)[0].endswith("/"):
                return super().send_head()  # the redirect to the folder's path with a slash
            index = unlinked_path(root, urllib.parse.urlsplit(self.path).path + "index.html")
            if index is None or not index.is_file():
                self.send_error(404, "File not found")
                return None
        return super().send_head()

    def list_directory(self, path: Any) -> Any:
        self.send_error(404, "File not found")
        return None

    def end_headers(self) -> None:
        self.send_header("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        self.send_header("X-Content-Type-Options", "nosniff")
        super().end_headers()


def site_server(site_dir: Path, port: int) -> http.server.ThreadingHTTPServer:
    """A server of ``site_dir`` on 127.0.0.1:``port`` (0 picks a free one); raises ``OSError`` when it cannot listen."""
    root = site_dir.resolve()
    return http.server.ThreadingHTTPServer(("127.0.0.1", port), functools.partial(SiteHandler, directory=str(root)))

"""Follow every link and resource a dashboard page shows, on this server only."""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

ORIGIN = "http://localhost"


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        for name, value in attrs:
            if name in ("href", "src") and value and not value.startswith(("data:", "#")):
                self.links.append(value)


def links(html: str) -> list[str]:
    parser = _Links()
    parser.feed(html)
    return parser.links


def crawl(get, start: str) -> dict[str, int]:
    """Every same-origin page and link reachable from `start`: path -> status. `get(path)`
    returns a response (httpx's or Starlette's TestClient's), redirects not followed."""
    seen: dict[str, int] = {}
    todo = [start]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        r = get(path)
        seen[path] = r.status_code
        if r.status_code == 200 and r.headers["content-type"].startswith("text/html"):
            for link in links(r.text):
                url = urlsplit(urljoin(ORIGIN + path, link))
                if f"{url.scheme}://{url.netloc}" == ORIGIN:
                    todo.append(url.path + (f"?{url.query}" if url.query else ""))
    return seen


def chart_data(page: str, chart_id: str) -> dict:
    """The JSON a chart is drawn from (embedded in the page beside its canvas)."""
    found = re.search(rf'<script type="application/json" id="{chart_id}-data">(.*?)</script>',
                      page, re.S)
    assert found, f"no data for chart {chart_id}"
    return json.loads(html.unescape(found.group(1)))

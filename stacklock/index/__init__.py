"""Reading wheel indexes: pure page parsers, an HTTP/file client, a finder."""

from __future__ import annotations

from stacklock.index.client import IndexClient
from stacklock.index.finder import (
    Evaluation,
    Finder,
    LinksReport,
    evaluate_link,
    find_links,
    is_exact_pin,
    render_links,
)
from stacklock.index.pages import (
    Link,
    ParsedPage,
    SkippedLink,
    parse_file_listing,
    parse_flat_page,
    parse_html_page,
    parse_json_page,
)

__all__ = [
    "Evaluation",
    "Finder",
    "IndexClient",
    "Link",
    "LinksReport",
    "ParsedPage",
    "SkippedLink",
    "evaluate_link",
    "find_links",
    "is_exact_pin",
    "parse_file_listing",
    "parse_flat_page",
    "parse_html_page",
    "parse_json_page",
    "render_links",
]

"""Reading wheel indexes: pure page parsers, an HTTP/file client, a finder.

The names below load their module on first use (PEP 562), so importing one
submodule (the page cache, say) does not import the HTTP client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from stacklock._lazy import lazy_exports

if TYPE_CHECKING:
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

_HOME = {
    "IndexClient": "client",
    "Evaluation": "finder", "Finder": "finder", "LinksReport": "finder",
    "evaluate_link": "finder", "find_links": "finder", "is_exact_pin": "finder",
    "render_links": "finder",
    "Link": "pages", "ParsedPage": "pages", "SkippedLink": "pages",
    "parse_file_listing": "pages", "parse_flat_page": "pages",
    "parse_html_page": "pages", "parse_json_page": "pages",
}

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


__getattr__ = lazy_exports(__name__, _HOME)

"""The PyTorch index role of the loopback mirror (tests/helpers/mirror.py): pages
in the format download.pytorch.org serves, over the stand-ins of
tests/data/mirror/pytorch/files.toml."""

from __future__ import annotations

import hashlib
from urllib.parse import quote

from tests.helpers.standins import StandIn, pytorch_files

PYTORCH_CHANNELS = ("nightly/cu130", "cu130")
# S3's answer for a key it will not show (what download.pytorch.org serves for a
# project it does not have)
ACCESS_DENIED = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied'
                 b"</Code><Message>Access Denied</Message></Error>")
PAGE_TIMESTAMP = 1764662400  # 2026-12-02T08:00:00Z, the pages' <!--TIMESTAMP-->


def render_pytorch_page(project: str, files: list[StandIn], host: str) -> bytes:
    """download.pytorch.org's page as pytorch/test-infra's manage_v2.py writes it
    (tests/data/real/PROVENANCE.md): no <head>, 4-space anchors ending ``<br/>``,
    absolute hrefs on the wheel host with ``%2B``, ``#sha256=`` only where the
    stand-in says the release page has one (never on nightlies), both PEP 658/714
    attributes with the METADATA file's sha256, ``data-upload-time``, anchors
    sorted by href, a ``<!--TIMESTAMP-->`` and no trailing newline."""
    anchors = []
    for f in files:
        href = f"{host}/whl/{f.channel}/{quote(f.filename)}"
        if f.page_sha256:
            href += f"#sha256={f.sha256}"
        meta = f"sha256={hashlib.sha256(f.metadata).hexdigest()}"
        anchors.append((href, f'    <a href="{href}" data-dist-info-metadata="{meta}"'
                              f' data-core-metadata="{meta}" data-upload-time='
                              f'"{f.upload_time}">{f.filename}</a><br/>'))
    lines = ["<!DOCTYPE html>", "<html>", "  <body>",
             f"    <h1>Links for {project}</h1>",
             *(line for _, line in sorted(anchors)), "  </body>", "</html>",
             f"<!--TIMESTAMP {PAGE_TIMESTAMP}-->"]
    return "\n".join(lines).encode()


def pytorch_page(url_path: str, host: str, *, as_of: str | None = None
                 ) -> bytes | None:
    """The PyTorch role's page at ``url_path`` (``/whl/<channel>/<project>/``),
    or None: no such project (the server answers 403); ``as_of`` (RFC 3339,
    ``Z``): the page as it was then, listing the files uploaded by that time."""
    for channel in PYTORCH_CHANNELS:
        prefix = f"/whl/{channel}/"
        rest = url_path[len(prefix):].strip("/")
        if url_path.startswith(prefix) and rest and "/" not in rest:
            files = [f for f in pytorch_files()
                     if f.channel == channel and f.project == rest
                     and (as_of is None or f.upload_time <= as_of)]
            return render_pytorch_page(rest, files, host) if files else None
    return None

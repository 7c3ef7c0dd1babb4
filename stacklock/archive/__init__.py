"""``stacklock archive LOCK DEST``: the files a lock installs, kept where they
outlive the index.

PyTorch's nightly index keeps only its newest builds, so a nightly lock's URLs
stop answering within weeks. An archive keeps each file the lock installs
(wheels, sdists, archives, the CUDA runfile) under its sha256, in a folder or an
S3 prefix (:mod:`stacklock.objectstore`), with a PEP 503 index beside them
(layout: :mod:`stacklock.lockarchive`). ``install``, ``pack`` and ``bisect``
given ``--archive`` fetch a file from there when its URL is gone; uv and pip can
use ``DEST/simple`` as an index. Archiving more locks into one DEST adds to it:
a file already there is not copied again, and each project page keeps the
files it listed.

``ArchiveResult.to_dict()`` (``--json``)::

    {"schema": "stacklock.archive/1", "lock": "path", "archive": "s3://...",
     "files": [{"filename": "...", "sha256": "...", "size": 123,
                "kind": "wheel" | "sdist" | "archive" | "runfile" | "patch",
                "project": "torch" | null, "state": "copied" | "present"}],
     "copied": 3, "present": 40, "bytes_copied": 123,
     "projects": ["torch", ...], "skipped": ["pkg: a vcs checkout, not a file"]}
"""

from __future__ import annotations

from stacklock.archive.write import (
    ArchivedFile,
    ArchiveResult,
    archive_lock,
    render_archive,
)

__all__ = ["ArchiveResult", "ArchivedFile", "archive_lock", "render_archive"]

"""What reading a broken wheel or sdist from disk raises, one tuple for every
reader: ``zipfile`` and ``tarfile`` raise their own errors for a broken
directory or header, but pass on the decompressor's for broken member data
(``zlib.error``, ISA-L's) and ``EOFError`` for a compressed stream that ends
early (a ``.tar.gz`` cut short), neither an ``OSError``."""

from __future__ import annotations

import tarfile
import zipfile

from stacklock.metadata.remote_zip import BAD_DEFLATE

__all__ = ["BROKEN_ARCHIVE"]

BROKEN_ARCHIVE: tuple[type[Exception], ...] = (
    zipfile.BadZipFile, tarfile.TarError, *BAD_DEFLATE, EOFError, OSError)

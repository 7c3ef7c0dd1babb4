"""A wheel's METADATA as the resolver needs it: pure functions of bytes.

Only the fields used are read and validated (``Requires-Dist``,
``Requires-Python``, ``Provides-Extra``, name and version), and the result is
checked against the wheel's file name; the fetching lives in
:mod:`stacklock.metadata.fetch`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import InvalidVersion, Version

from stacklock.bounded import shorten
from stacklock.errors import MetadataError
from stacklock.index.links import parse_filename
from stacklock.urls import strip_credentials

if TYPE_CHECKING:
    from stacklock.index.links import Link

__all__ = ["WheelMetadata", "cache_key", "parse_metadata", "parse_wheel_metadata"]


def cache_key(link: Link) -> str:
    """The file's sha256 when known (content keyed), else a hash of URL + name:
    the key of its metadata in the cache."""
    if link.sha256:
        return link.sha256.lower()
    ident = f"{strip_credentials(link.url)}\n{link.filename}".encode()
    return "url-" + hashlib.sha256(ident).hexdigest()


@dataclass(frozen=True, kw_only=True)
class WheelMetadata:
    """What the resolver needs from one wheel; ``raw`` is the METADATA file."""

    name: NormalizedName
    version: Version
    requires_dist: tuple[Requirement, ...]
    requires_python: SpecifierSet | None
    provides_extra: tuple[NormalizedName, ...]
    raw: bytes


def parse_wheel_metadata(raw: bytes, filename: str) -> WheelMetadata:
    """Parse METADATA bytes of the wheel ``filename`` and check they belong to it.

    Real wheels carry quirks that strict validation rejects (unknown fields, an old
    Metadata-Version with newer fields), so only the fields used are validated.
    """
    return parse_metadata(raw, filename, where=filename)


# The header fields the resolver reads, as METADATA spells them (lower case).
_WANTED = frozenset(
    ("name", "version", "requires-dist", "requires-python", "provides-extra"))
_ONCE = ("name", "version", "requires-python")
_FIELD = re.compile(r"[\x21-\x39\x3b-\x7e]+")


def _plain_fields(raw: bytes) -> dict[str, list[str]] | None:
    """The wanted header fields of a plain METADATA file, without the email parser.

    The email parser reads the whole file (descriptions run to 100 KB) and costs
    more than the rest of a cold resolution's metadata work. This reads only the
    header block and answers None for anything it does not read exactly as
    ``packaging.metadata.parse_email`` would (CR line ends, non-ASCII, folded or
    repeated single fields, a missing name or version); the caller then uses
    packaging.
    """
    end = raw.find(b"\n\n")
    head = raw.removesuffix(b"\n") if end < 0 else raw[:end]
    if b"\r" in head:
        return None
    found: dict[str, list[str]] = {}
    current = ""
    for line in head.decode("ascii", "surrogateescape").split("\n"):
        if line[:1] in (" ", "\t"):
            if current in _WANTED:
                return None  # a folded value: the email parser's rules apply
            continue
        field, colon, value = line.partition(":")
        if not colon or _FIELD.fullmatch(field) is None or line.startswith("From "):
            return None
        current = field.lower()
        if current in _WANTED:
            if not value.isascii():
                return None  # the email parser decodes these its own way
            found.setdefault(current, []).append(value.lstrip(" \t"))
    if any(len(found.get(key, ())) != 1 for key in _ONCE[:2]) or len(
        found.get("requires-python", ())
    ) > 1:
        return None
    return found


def parse_metadata(raw: bytes, filename: str, *, where: str) -> WheelMetadata:
    """METADATA of the wheel ``filename``, or the metadata of the wheel the
    sdist ``filename`` builds (its PKG-INFO or prepared METADATA), checked
    against the file name's project and version."""
    parsed = parse_filename(filename)
    if isinstance(parsed, str):
        raise MetadataError(f"{where}: {parsed}")
    wheel_name, wheel_version, _build, _tags = parsed
    try:
        plain = _plain_fields(raw)
        if plain is not None:
            found_name = plain["name"][0]
            name = canonicalize_name(found_name, validate=True)
            version = Version(plain["version"][0])
            requires_dist = tuple(
                Requirement(r) for r in plain.get("requires-dist", ()))
            python = plain.get("requires-python")
            requires_python = SpecifierSet(python[0]) if python else None
            provides_extra = tuple(
                canonicalize_name(e, validate=True)
                for e in plain.get("provides-extra", ())
            )
        else:  # the email parser: ~20 modules, imported for the rare file
            from packaging.metadata import Metadata

            meta = Metadata.from_email(raw, validate=False)
            found_name = meta.name
            name = canonicalize_name(meta.name)
            version = meta.version
            requires_dist = tuple(meta.requires_dist or ())
            requires_python = meta.requires_python
            provides_extra = tuple(meta.provides_extra or ())
    except (  # packaging's InvalidMetadata is a ValueError
        InvalidRequirement,
        InvalidSpecifier,
        InvalidVersion,
        KeyError,
        TypeError,
        ValueError,
    ) as exc:
        raise MetadataError(
            f"{where}: METADATA cannot be parsed: "
            f"{shorten(str(exc).strip().splitlines()[0] if str(exc).strip() else '')}",
            hint="the file is malformed; exclude this version or report it upstream",
        ) from exc
    if name != wheel_name or version != wheel_version:
        raise MetadataError(
            f"{where}: METADATA says {found_name} {version}, "
            f"the filename says {wheel_name} {wheel_version}",
            hint="the index serves a wrong or renamed file; exclude this version",
        )
    return WheelMetadata(
        name=name,
        version=version,
        requires_dist=requires_dist,
        requires_python=requires_python,
        provides_extra=provides_extra,
        raw=raw,
    )

"""Wheel METADATA: the on-disk cache, PEP 658 files, HTTP range reads into the
remote zip (``remote_zip``), and a full download only as the last resort."""

from __future__ import annotations

from stacklock.metadata.fetch import MetadataFetcher
from stacklock.metadata.parse import WheelMetadata, parse_wheel_metadata

__all__ = ["MetadataFetcher", "WheelMetadata", "parse_wheel_metadata"]

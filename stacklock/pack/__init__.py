"""Air-gapped packs: one file with a lock, its wheels, its runfile, and stacklock
and uv themselves, that installs on a node with only Python and no network.

``write_pack`` makes one (:mod:`stacklock.pack.writer`); ``install_pack`` installs
one (:mod:`stacklock.pack.install`); the format and its standard-library reader are
in :mod:`stacklock.pack.format`, the bootstrap that ``python3 PACK`` runs in
:mod:`stacklock.pack.boot`.
"""

from __future__ import annotations

from stacklock.errors import PackError
from stacklock.pack.format import Manifest, Member, is_pack, read_manifest

__all__ = ["Manifest", "Member", "PackError", "is_pack", "read_manifest"]

"""Where an archive's objects live: a folder (a path or ``file://``) or an S3
bucket (``s3://bucket/prefix``), behind one small interface of keys and bytes.

S3 goes through boto3 (the ``stacklock[s3]`` extra; imported only for an
``s3://`` URL): its credentials, region and endpoint come from where every AWS
tool reads them (``AWS_ACCESS_KEY_ID``..., ``AWS_PROFILE``, ``~/.aws/config``
and ``credentials``, an instance role; ``AWS_ENDPOINT_URL_S3`` or
``AWS_ENDPOINT_URL`` for MinIO, Ceph, R2 and the like), never from a lock or an
archive URL. boto3 rather than fsspec's s3fs: it is synchronous as stacklock is,
and brings no event loop or aiohttp. An ``http(s)://`` archive is read by the
one HTTP client (:mod:`stacklock.http`), not here: a static folder served over
HTTP cannot be written.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote, urlsplit

from stacklock._fs import atomic_write_bytes
from stacklock.errors import StacklockError
from stacklock.urls import redact_url

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["FolderObjects", "ObjectStore", "S3Objects", "is_http",
           "open_object_store"]


class ObjectStore(Protocol):
    """Objects by key (``files/<sha256>/<name>``, ``simple/<project>/index.html``)."""

    @property
    def url(self) -> str:
        """Where the store is, as the user named it."""

    def size(self, key: str) -> int | None:
        """The object's size, None when there is none."""

    def get(self, key: str, dest: Path) -> bool:
        """Copy the object into ``dest``; False when there is none."""

    def read(self, key: str) -> bytes | None:
        """A small object's bytes (an index page), None when there is none."""

    def put(self, key: str, source: Path) -> None:
        """Store ``source`` under ``key``, whole or not at all."""

    def write(self, key: str, data: bytes, content_type: str) -> None:
        """Store ``data`` under ``key``, whole or not at all."""

    def children(self, prefix: str) -> Iterator[str]:
        """The names one level below ``prefix`` (``simple/`` -> project names)."""


def is_http(url: str) -> bool:
    return url.startswith(("http://", "https://"))


@dataclass(frozen=True)
class FolderObjects:
    """A folder: each key a file under ``root``, written atomically."""

    root: Path

    def __post_init__(self) -> None:
        if self.root.exists() and not self.root.is_dir():
            raise StacklockError(f"{self.root}: not a folder",
                                 hint="name a folder (made if missing), a file:// "
                                      "or s3:// URL")

    @property
    def url(self) -> str:
        return str(self.root)

    def _path(self, key: str) -> Path:
        parts = key.split("/")
        if any(p in ("", ".", "..") for p in parts):
            raise StacklockError(f"{self.root}: refusing the object key {key!r}")
        return self.root.joinpath(*parts)

    def size(self, key: str) -> int | None:
        try:
            return self._path(key).stat().st_size
        except OSError:
            return None

    def get(self, key: str, dest: Path) -> bool:
        try:
            shutil.copyfile(self._path(key), dest)
        except FileNotFoundError:
            return False
        return True

    def read(self, key: str) -> bytes | None:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            return None

    def put(self, key: str, source: Path) -> None:
        target = self._path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.part")
        try:
            shutil.copyfile(source, tmp)
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    def write(self, key: str, data: bytes, content_type: str) -> None:
        target = self._path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(target, data, shared=True)  # pages a web server serves

    def children(self, prefix: str) -> Iterator[str]:
        folder = self._path(prefix.rstrip("/"))
        if folder.is_dir():
            yield from sorted(p.name for p in folder.iterdir() if p.is_dir())


class S3Objects:
    """``s3://bucket/prefix`` through boto3, credentials from the environment
    and the AWS config files (boto3's own chain)."""

    url: str

    def __init__(self, url: str, *, client: Any = None) -> None:
        parts = urlsplit(url)
        if not parts.netloc or parts.query or parts.fragment or "@" in parts.netloc:
            raise StacklockError(f"{redact_url(url)}: not an s3://BUCKET/PREFIX URL",
                                 hint="e.g. s3://team-wheels/stacklock; credentials "
                                      "come from AWS_* variables or ~/.aws")
        self.url = url.rstrip("/")
        self.bucket = parts.netloc
        self.prefix = unquote(parts.path).strip("/")
        self._client = client or _s3_client()

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _call(self, what: str, key: str, call: Any) -> Any:
        """``call()`` with boto3's errors as one StacklockError each; a missing
        object is ``None``."""
        import botocore.exceptions as bce

        shown = f"s3://{self.bucket}/{self._key(key)}"
        try:
            return call()
        except bce.ClientError as exc:
            error = exc.response.get("Error", {})
            code = str(error.get("Code", ""))
            if code in ("404", "NoSuchKey", "NotFound"):
                return None
            raise StacklockError(
                f"{shown}: {what} refused: {code} {error.get('Message', '')}".strip(),
                hint="check the bucket, and the credentials in AWS_* variables or "
                     "~/.aws") from exc
        except bce.NoCredentialsError as exc:
            raise StacklockError(f"{shown}: no AWS credentials found",
                                 hint="set AWS_ACCESS_KEY_ID and "
                                      "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE") from exc
        except (bce.EndpointConnectionError, bce.ConnectionClosedError,
                bce.ReadTimeoutError, bce.ConnectTimeoutError) as exc:
            raise StacklockError(f"{shown}: {what} failed: {exc}",
                                 hint="check the endpoint (AWS_ENDPOINT_URL_S3) "
                                      "and the network", network=True) from exc
        except bce.BotoCoreError as exc:
            raise StacklockError(f"{shown}: {what} failed: {exc}",
                                 hint="check the AWS configuration") from exc

    def size(self, key: str) -> int | None:
        head = self._call("HEAD", key, lambda: self._client.head_object(
            Bucket=self.bucket, Key=self._key(key)))
        return None if head is None else int(head["ContentLength"])

    def get(self, key: str, dest: Path) -> bool:
        def fetch() -> bool:
            answer = self._client.get_object(Bucket=self.bucket, Key=self._key(key))
            with dest.open("wb") as fh:
                for chunk in answer["Body"].iter_chunks(1 << 20):
                    fh.write(chunk)
            return True

        return bool(self._call("GET", key, fetch))

    def read(self, key: str) -> bytes | None:
        def fetch() -> bytes:
            answer = self._client.get_object(Bucket=self.bucket, Key=self._key(key))
            data: bytes = answer["Body"].read()
            return data

        found: bytes | None = self._call("GET", key, fetch)
        return found

    def put(self, key: str, source: Path) -> None:
        self._call("PUT", key, lambda: self._client.upload_file(
            str(source), self.bucket, self._key(key)))

    def write(self, key: str, data: bytes, content_type: str) -> None:
        self._call("PUT", key, lambda: self._client.put_object(
            Bucket=self.bucket, Key=self._key(key), Body=data,
            ContentType=content_type))

    def children(self, prefix: str) -> Iterator[str]:
        base = self._key(prefix.rstrip("/")) + "/"

        def listed() -> list[str]:
            names: list[str] = []
            pages = self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=base, Delimiter="/")
            for page in pages:
                for entry in page.get("CommonPrefixes", ()):
                    names.append(entry["Prefix"][len(base):].rstrip("/"))
            return names

        yield from sorted(self._call("LIST", prefix, listed) or ())


def _s3_client() -> Any:
    import importlib.util

    if importlib.util.find_spec("boto3") is None:
        raise StacklockError("an s3:// archive needs boto3, which is not installed",
                             hint="pip install 'stacklock[s3]'")
    import boto3

    # a session of its own: the credentials as the environment has them now
    return boto3.session.Session().client("s3")


def open_object_store(url: str) -> ObjectStore:
    """The store at ``url``: ``s3://``, ``file://`` or a folder path."""
    if url.startswith("s3://"):
        return S3Objects(url)
    if is_http(url):
        raise StacklockError(f"{redact_url(url)}: an HTTP(S) archive can be read, "
                             "not written",
                             hint="write the archive to a folder (served over "
                                  "HTTP) or an s3:// URL")
    if url.startswith("file://"):
        parts = urlsplit(url)
        if parts.netloc not in ("", "localhost"):
            raise StacklockError(f"{redact_url(url)}: a file:// URL names a local path",
                                 hint="file:///srv/archive")
        return FolderObjects(Path(unquote(parts.path)))
    if "://" in url:
        raise StacklockError(f"{redact_url(url)}: unknown archive scheme",
                             hint="a folder, file://, s3:// or (to read) https://")
    return FolderObjects(Path(url))

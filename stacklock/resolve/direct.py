"""Direct references in a profile (PEP 508 ``name @ URL``), locked exactly.

A direct reference names one artifact, not a range of versions: a wheel or an
sdist by URL or path (a PEP 751 ``archive``), a git repository at a revision
(``vcs``, the revision resolved to its commit), or a local source tree
(``directory``). Each is read before the resolver starts: an archive is
downloaded into the artifact store and hashed (against the URL's ``#sha256=``
when it has one), a repository cloned at its commit, and the metadata read (a
wheel's METADATA; an sdist's PKG-INFO where PEP 643 lets it stand for the built
wheel's; a source tree's ``pyproject.toml`` where PEP 621 makes it static; else
the PEP 517 backend). The resolver then sees the reference as the only
candidate of its project, so it beats any index's, and every other requirement
on the project must accept its version.

What cannot be locked exactly is refused with one line naming the requirement:
another VCS than git, a revision the repository does not have, a file that is
neither a wheel nor an sdist, a name that is not the artifact's, a direct
reference written in ``overrides`` or ``constraints``, and one that a
dependency's METADATA makes (PyPI refuses those; other indexes may not) unless
the profile names the same reference.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit
from urllib.request import url2pathname

from packaging.metadata import parse_email
from packaging.utils import (
    InvalidWheelFilename,
    NormalizedName,
    canonicalize_name,
    parse_wheel_filename,
)

from stacklock._fs import file_digest
from stacklock.errors import MetadataError, ProfileError
from stacklock.metadata.archive_errors import BROKEN_ARCHIVE
from stacklock.metadata.parse import WheelMetadata, parse_metadata
from stacklock.metadata.pkg_info import is_pkg_info_member, untrusted_reason
from stacklock.metadata.pyproject import static_project_metadata
from stacklock.metadata.remote_zip import pick_metadata
from stacklock.resolve.model import holds_on
from stacklock.urls import redact_url, strip_credentials

if TYPE_CHECKING:
    from collections.abc import Mapping

    import httpx
    from packaging.requirements import Requirement

    from stacklock.metadata.build import BuildSetup
    from stacklock.profile import RequirementsSpec
    from stacklock.runner import Runner
    from stacklock.store import ArtifactStore
    from stacklock.target import Target

__all__ = ["DirectArtifact", "DirectRef", "find_direct", "parse_direct",
           "read_direct"]

_ARCHIVES = (".whl", ".tar.gz", ".zip")
_FULL_SHA = re.compile(r"[0-9a-fA-F]{40}")
_SHORT_SHA = re.compile(r"[0-9a-fA-F]{7,39}")
_GIT_ENV = {"GIT_TERMINAL_PROMPT": "0"}  # never wait for a password prompt
_GIT_SECONDS = 900.0  # a clone of a large repository


@dataclass(frozen=True, kw_only=True)
class DirectRef:
    """What a direct reference names, read from its text alone. ``kind`` is
    "archive" (``url`` or ``path``, ``filename``, ``sha256`` from the URL's
    fragment), "vcs" (git: ``url`` of the repository, ``revision`` as written)
    or "directory" (``path``); ``subdirectory`` from the URL's fragment."""

    text: str  # the requirement, credentials redacted: for messages
    name: NormalizedName
    kind: str
    url: str | None = None
    path: Path | None = None
    filename: str | None = None
    sha256: str | None = None
    revision: str | None = None
    subdirectory: str | None = None

    @property
    def is_wheel(self) -> bool:
        return self.kind == "archive" and (self.filename or "").endswith(".whl")

    @property
    def same_as_key(self) -> tuple[str | None, str | None, str | None, str | None]:
        """What decides whether two references name the same artifact."""
        where = strip_credentials(self.url) if self.url else str(self.path)
        return (self.kind, where, self.revision, self.subdirectory)


@dataclass(frozen=True, kw_only=True)
class DirectArtifact:
    """A direct reference read: its metadata, and what the lock records of it
    (an archive's sha256 and size, a repository's commit)."""

    ref: DirectRef
    metadata: WheelMetadata
    sha256: str | None = None
    size: int | None = None
    commit: str | None = None


def parse_direct(req: Requirement, *, base: Path) -> DirectRef:
    """The reference ``req.url`` names; a relative path is relative to ``base``
    (the profile's folder). Pure but for asking whether a local path is a
    folder or a file."""
    url = req.url or ""
    name = canonicalize_name(req.name)
    text = f"{req.name} @ {redact_url(url)}"
    parts = urlsplit(url)
    fragment = dict(parse_qsl(parts.fragment))
    sub = fragment.get("subdirectory")
    if "+" in parts.scheme:
        vcs, _, inner = parts.scheme.partition("+")
        if vcs != "git":
            raise ProfileError(f"{text}: {vcs} repositories are not supported, only "
                               "git", key="requirements.packages",
                               hint="point it at a git repository, or at a wheel or "
                               "sdist built from it")
        path, at, revision = parts.path.rpartition("@")
        if not at:
            path, revision = parts.path, ""
        repo = urlunsplit((inner, parts.netloc, path, parts.query, ""))
        if repo.startswith("-") or parts.netloc.startswith("-") or (
                parts.hostname or "").startswith("-"):
            raise ProfileError(f"{text}: the repository URL starts with '-', which "
                               "git would read as an option",
                               key="requirements.packages",
                               hint="give the repository's URL, e.g. "
                               "git+https://host/org/repo@REV")
        return DirectRef(text=text, name=name, kind="vcs", url=repo,
                         revision=revision or None, subdirectory=sub)
    if parts.scheme in ("http", "https"):
        filename = unquote(parts.path.rsplit("/", 1)[-1])
        if not filename.endswith(_ARCHIVES):
            raise ProfileError(f"{text}: {filename or 'the URL'} is neither a wheel "
                               "nor an sdist (.whl, .tar.gz, .zip)",
                               key="requirements.packages",
                               hint="give the URL of the file itself, or "
                               "git+https://...@REV for a repository")
        return DirectRef(text=text, name=name, kind="archive",
                         url=urlunsplit(parts._replace(fragment="")),
                         filename=filename, sha256=fragment.get("sha256"),
                         subdirectory=sub)
    if parts.scheme not in ("", "file"):
        raise ProfileError(f"{text}: {parts.scheme}:// is not supported",
                           key="requirements.packages",
                           hint="use https://, git+https://, file:// or a path")
    local = Path(url2pathname(parts.path) if parts.scheme == "file" else url)
    local = local if local.is_absolute() else (base / local).resolve()
    if local.is_dir():
        return DirectRef(text=text, name=name, kind="directory", path=local,
                         subdirectory=sub)
    if local.is_file() and local.name.endswith(_ARCHIVES):
        return DirectRef(text=text, name=name, kind="archive", path=local,
                         filename=local.name, sha256=fragment.get("sha256"))
    what = "is neither a wheel nor an sdist" if local.exists() else "does not exist"
    raise ProfileError(f"{text}: {local} {what}", key="requirements.packages",
                       hint="a path to a source folder, a .whl, .tar.gz or .zip "
                       "(relative to the profile's folder)")


def find_direct(spec: RequirementsSpec, environment: Mapping[str, str], *,
                base: Path, path: str | None) -> dict[NormalizedName, DirectRef]:
    """The direct references of ``[requirements] packages`` whose markers hold
    on the target, by project; ``path`` names the profile in errors."""
    for key, reqs in (("overrides", spec.overrides),
                      ("constraints", spec.constraints)):
        for req in reqs:
            if req.url:
                raise ProfileError(
                    f"{req.name} @ {redact_url(req.url)}: a direct reference in "
                    f"{key} is not supported", path=path,
                    key=f"requirements.{key}",
                    hint="write it in [requirements] packages: a direct "
                    "reference there beats every other requirement on the project")
    found: dict[NormalizedName, DirectRef] = {}
    for req in spec.packages:
        if not req.url or not holds_on(req, environment):
            continue
        try:
            ref = parse_direct(req, base=base)
        except ProfileError as exc:
            raise ProfileError(exc.detail, path=path, key=exc.key,
                               hint=exc.hint) from None
        if not ref.is_wheel and spec.refuses_build(ref.name):
            what = "an sdist" if ref.kind == "archive" else "a source tree"
            raise ProfileError(f"{ref.text}: {what}, which install builds, and "
                               f"no-build refuses building {ref.name}", path=path,
                               key="requirements.no-build",
                               hint=f"point {ref.name} at a wheel, or leave it out "
                               "of no-build")
        seen = found.get(ref.name)
        if seen is not None and seen.same_as_key != ref.same_as_key:
            raise ProfileError(f"{seen.text} and {ref.text}: two direct references "
                               f"to {ref.name}", path=path,
                               key="requirements.packages",
                               hint="keep one of them")
        found[ref.name] = ref
    return found


def read_direct(ref: DirectRef, *, target: Target, http: httpx.Client,
                store: ArtifactStore, root: Path, runner: Runner,
                setup: BuildSetup | None, offline: bool = False) -> DirectArtifact:
    """Fetch what ``ref`` names and read its metadata (see the module
    docstring); ``root`` is the cache folder (its git/ holds the checkouts). A
    wheel none of whose tags ``target`` accepts is refused before it is
    fetched, a project whose Requires-Python excludes it after. ``offline``:
    only what an earlier run stored (an archive by URL, a repository at a full
    commit id), else one line saying so."""
    _check_tags(ref, target)
    if offline:
        _check_offline(ref, store=store, root=root)
    found = _read(ref, http=http, store=store, root=root, runner=runner,
                  setup=setup)
    python = found.metadata.requires_python
    if python is not None and not python.contains(target.python_full_version,
                                                  prereleases=True):
        raise ProfileError(f"{ref.text}: requires-python {python} excludes the "
                           f"target's python {target.python}",
                           key="requirements.packages",
                           hint="point it at a release for the target's python")
    return found


def _read(ref: DirectRef, *, http: httpx.Client, store: ArtifactStore,
          root: Path, runner: Runner, setup: BuildSetup | None) -> DirectArtifact:
    if ref.kind == "archive":
        if ref.path is not None:
            local, sha = ref.path, file_digest(ref.path)
            if ref.sha256 and ref.sha256.lower() != sha:
                raise ProfileError(f"{ref.text}: sha256 {sha}, not the {ref.sha256} "
                                   "the URL names", key="requirements.packages",
                                   hint="fix the #sha256= or the file")
        else:
            assert ref.url is not None
            local, sha = store.fetch(http, ref.url, expected_sha256=ref.sha256)
        meta = _archive_metadata(ref, local, setup)
        return DirectArtifact(ref=ref, metadata=_check_name(ref, meta), sha256=sha,
                              size=local.stat().st_size)
    commit = None
    tree = ref.path
    if ref.kind == "vcs":
        checkout, commit = _git_checkout(ref, root=root, runner=runner)
        tree = checkout
    assert tree is not None
    if ref.subdirectory:
        tree = tree / ref.subdirectory
        if not tree.is_dir():
            raise ProfileError(f"{ref.text}: no subdirectory {ref.subdirectory!r}",
                               key="requirements.packages",
                               hint="fix #subdirectory= in the URL")
    meta = _tree_metadata(ref, tree, setup)
    return DirectArtifact(ref=ref, metadata=_check_name(ref, meta), commit=commit)


def _check_offline(ref: DirectRef, *, store: ArtifactStore, root: Path) -> None:
    if ref.kind == "archive" and ref.url is not None:
        stored = (store.has(ref.sha256.lower()) if ref.sha256
                  else store.sha256_for_url(ref.url) is not None)
        if not stored:
            raise ProfileError(f"{ref.text}: not in the cache, and --offline",
                               key="requirements.packages",
                               hint="run once without --offline to fetch it")
    if ref.kind == "vcs":
        assert ref.url is not None
        key = _repo_key(ref.url)
        rev = (ref.revision or "").lower()
        if not (_FULL_SHA.fullmatch(rev) and (root / "git" / f"{key}-{rev}").is_dir()):
            raise ProfileError(f"{ref.text}: --offline cannot ask the repository "
                               "which commit this names", key="requirements.packages",
                               hint="pin a full commit id resolved before, or run "
                               "without --offline")


def _check_tags(ref: DirectRef, target: Target) -> None:
    if not ref.is_wheel or not ref.filename:
        return
    try:
        wheel_tags = parse_wheel_filename(ref.filename)[3]
    except InvalidWheelFilename as exc:
        raise ProfileError(f"{ref.text}: {exc}", key="requirements.packages",
                           hint="point it at a wheel by its real file name") from None
    if not wheel_tags & set(target.tags()):
        shown = ", ".join(sorted(str(t) for t in wheel_tags))
        raise ProfileError(f"{ref.text}: no tag of the wheel ({shown}) fits the "
                           f"target (python {target.python}, {target.platform}, "
                           f"manylinux_{target.manylinux})",
                           key="requirements.packages",
                           hint="point it at a wheel built for the target")


def _check_name(ref: DirectRef, meta: WheelMetadata) -> WheelMetadata:
    if meta.name != ref.name:
        raise ProfileError(f"{ref.text}: the artifact is {meta.name} {meta.version}, "
                           f"not {ref.name}", key="requirements.packages",
                           hint=f"write {meta.name} @ ... or point at {ref.name}")
    return meta


# a broken archive, or a wheel without METADATA (KeyError)
_UNREADABLE: tuple[type[Exception], ...] = (*BROKEN_ARCHIVE, KeyError)


def _archive_metadata(ref: DirectRef, local: Path, setup: BuildSetup | None
                      ) -> WheelMetadata:
    filename = ref.filename or local.name
    where = ref.text
    try:
        if ref.is_wheel:
            with zipfile.ZipFile(local) as archive:
                raw = archive.read(pick_metadata(archive.namelist(), filename))
            return parse_metadata(raw, filename, where=where)
        raw_or_none = _pkg_info(local)
    except _UNREADABLE as exc:
        raise MetadataError(f"{where}: not a readable archive: {exc}",
                            hint="check the URL or the file") from exc
    why = ("the sdist has no PKG-INFO" if raw_or_none is None
           else untrusted_reason(raw_or_none))
    if raw_or_none is not None and why is None:
        return parse_metadata(raw_or_none, filename, where=where)
    return parse_metadata(_build(ref, local, setup, why or ""), filename, where=where)


def _pkg_info(sdist: Path) -> bytes | None:
    """The sdist's own ``<top>/PKG-INFO``, read from the file on disk."""
    if zipfile.is_zipfile(sdist):
        with zipfile.ZipFile(sdist) as archive:
            member = next((n for n in archive.namelist() if is_pkg_info_member(n)),
                          None)
            return archive.read(member) if member else None
    with tarfile.open(sdist) as archive:
        for info in archive:
            if info.isfile() and is_pkg_info_member(info.name):
                fh = archive.extractfile(info)
                return fh.read() if fh is not None else None
    return None


def _tree_metadata(ref: DirectRef, tree: Path, setup: BuildSetup | None
                   ) -> WheelMetadata:
    pyproject = tree / "pyproject.toml"
    found = (static_project_metadata(pyproject.read_bytes()) if pyproject.is_file()
             else "no pyproject.toml")
    raw = found if isinstance(found, bytes) else _build(ref, tree, setup, found)
    fields, _ = parse_email(raw)
    name, version = fields.get("name"), fields.get("version")
    if not name or not version:
        raise MetadataError(f"{ref.text}: its metadata names no project or version")
    stem = canonicalize_name(name).replace("-", "_")
    return parse_metadata(raw, f"{stem}-{version}.tar.gz", where=ref.text)


def _build(ref: DirectRef, source: Path, setup: BuildSetup | None, why: str
           ) -> bytes:
    from stacklock.metadata.build import find_build_python, prepare_metadata

    if setup is None:
        raise MetadataError(f"{ref.text}: {why}, and building is turned off",
                            hint=f"point {ref.name} at a wheel")
    return prepare_metadata(source, project=ref.name,
                            filename=f"{ref.name}-direct-reference", setup=setup,
                            python=find_build_python(setup))


def _git_checkout(ref: DirectRef, *, root: Path, runner: Runner
                  ) -> tuple[Path, str]:
    """A checkout of the reference's commit in the cache (cloned once per
    repository and commit, without the blobs of other commits where the server
    allows), and that commit."""
    assert ref.url is not None
    commit = _git_commit(ref, runner)
    key = _repo_key(ref.url)
    folder = root / "git"
    if commit is not None and (folder / f"{key}-{commit}").is_dir():
        return folder / f"{key}-{commit}", commit
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{key}.{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        _git(runner, ["clone", "--quiet", "--no-checkout", "--filter=blob:none",
                      "--", ref.url, str(tmp)], ref=ref)
        if commit is None:  # a short commit id: only the clone knows it
            rc, out = runner.capture(["git", "-C", str(tmp), "rev-parse", "--verify",
                                      f"{ref.revision}^{{commit}}"], env=_GIT_ENV)
            if rc != 0 or not _FULL_SHA.fullmatch(out.strip()):
                raise ProfileError(f"{ref.text}: no commit, branch or tag "
                                   f"{ref.revision!r} in {redact_url(ref.url)}",
                                   key="requirements.packages",
                                   hint="use a tag, a branch or a full commit id")
            commit = out.strip().lower()
        _git(runner, ["-C", str(tmp), "checkout", "--quiet", "--detach", commit],
             ref=ref)
        dest = folder / f"{key}-{commit}"
        try:
            tmp.rename(dest)
        except OSError:  # another run put it there first
            pass
        return dest, commit
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _repo_key(url: str) -> str:
    """A repository's folder name in the cache: its URL without credentials."""
    return hashlib.sha256(strip_credentials(url).encode()).hexdigest()[:16]


def _git(runner: Runner, args: list[str], *, ref: DirectRef) -> None:
    """Run git, its output unlogged: the URL may carry credentials."""
    rc, _ = runner.capture(["git", *args], env=_GIT_ENV, timeout=_GIT_SECONDS)
    if rc != 0:
        what = ("git is not installed, or did not finish in "
                f"{_GIT_SECONDS:.0f} s" if rc == 127 else
                f"git {args[0] if args[0] != '-C' else args[2]} exited {rc}")
        raise ProfileError(f"{ref.text}: {what}", key="requirements.packages",
                           hint="check the repository URL and the revision with "
                           "git clone")


def _git_commit(ref: DirectRef, runner: Runner) -> str | None:
    """The commit the revision names (a full commit id as it is; a branch or a
    tag by ``git ls-remote``, an annotated tag peeled to its commit); None for
    a short commit id, which only a clone can resolve."""
    rev = ref.revision
    assert ref.url is not None
    if rev and _FULL_SHA.fullmatch(rev):
        return rev.lower()
    patterns = [rev, f"refs/tags/{rev}^{{}}"] if rev else ["HEAD"]
    rc, out = runner.capture(["git", "ls-remote", "--", ref.url, *patterns],
                             env=_GIT_ENV, timeout=120.0)
    if rc != 0:
        what = ("git is not installed, or did not answer in 120 s" if rc == 127
                else f"git ls-remote exited {rc}")
        raise ProfileError(f"{ref.text}: cannot read {redact_url(ref.url)}: {what}",
                           key="requirements.packages",
                           hint="check the repository URL and the network")
    refs = {}
    for line in out.splitlines():
        sha, _, name = line.partition("\t")
        refs[name.strip()] = sha.strip().lower()
    wanted = ([f"refs/tags/{rev}^{{}}", f"refs/tags/{rev}", f"refs/heads/{rev}", rev]
              if rev else ["HEAD"])
    commit = next((refs[w] for w in wanted if w in refs), None)
    if commit is not None:
        return commit
    if rev and _SHORT_SHA.fullmatch(rev):
        return None
    raise ProfileError(f"{ref.text}: no branch or tag {rev or 'HEAD'!r} in "
                       f"{redact_url(ref.url)}", key="requirements.packages",
                       hint="use a tag, a branch or a full commit id")

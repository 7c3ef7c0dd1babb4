"""What is installed in a venv, written as a PEP 751 lock.

Names and versions come from each ``*.dist-info/METADATA``. Where the wheel is
known the package gets a real ``wheels`` entry: from ``direct_url.json`` (URL
installs), or from the lock stacklock installed that generation from (matched by
name, version and the installed ``WHEEL`` tags). Anything else (pip-installed
from an index that left no record) keeps name and version, a ``directory`` entry
pointing at its dist-info, and is listed in ``[tool.stacklock] unknown-origin``;
such a snapshot diffs fine but cannot be installed as it is. The fingerprint of
each ``RECORD`` file lets a diff notice files changed in place. The result is a
:class:`~stacklock.lock.Lock`, written by the one lock writer.

``--patches DIR`` (:func:`write_patches`) turns the files edited in place into
one patch file per package, against the wheel the generation's lock names (from
the artifact store or its index, by range reads), and the ``[[patches]]`` stanza
that makes a profile reproduce them.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from email.parser import BytesHeaderParser
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.tags import Tag, parse_tag
from packaging.utils import canonicalize_name

from stacklock import __version__
from stacklock._fs import atomic_write_bytes
from stacklock.bounded import Malformed, open_regular, parse_json, read_regular
from stacklock.cuda.driver import parse_nvcc_version, read_driver
from stacklock.errors import CudaError, InstallError, RecordError
from stacklock.lock import Lock, load_lock, parse_lock_document
from stacklock.lock.model import wheel_tags
from stacklock.lock.write import dump_lock
from stacklock.record import load_record, record_bytes, sha256_of_digest
from stacklock.runner import SubprocessRunner

if TYPE_CHECKING:
    import httpx
    from packaging.pylock import PackageWheel

__all__ = [
    "PatchesMade",
    "find_edits",
    "installed_lock_path",
    "make_snapshot",
    "site_packages",
    "write_patches",
    "write_snapshot",
]


def installed_lock_path(venv: Path) -> Path | None:
    """The lock a stacklock generation was installed from, when there is one."""
    real = venv.resolve()
    if real.parent.name.endswith(".stacklock") and real.name.isdigit():
        path = real.parent / f"pylock.generation-{real.name}.toml"
        return path if path.is_file() else None
    return None


def site_packages(venv: Path) -> Path:
    found = sorted((venv / "lib").glob("python3*/site-packages"))
    if not found:
        raise InstallError(
            f"{venv}: no lib/python3*/site-packages, not a virtual environment",
            hint="pass --venv with the path of a venv",
        )
    return found[-1]


def _python_version(venv: Path) -> str | None:
    try:
        text = (venv / "pyvenv.cfg").read_text("utf-8")
    except OSError:
        return None
    values = {
        k.strip(): v.strip()
        for k, _, v in (line.partition("=") for line in text.splitlines())
    }
    return values.get("version_info") or values.get("version")


Known = dict[tuple[str, str], tuple["PackageWheel", ...]]


def _known_wheels(venv: Path) -> Known:
    path = installed_lock_path(venv)
    if path is None:
        return {}
    return {(p.name, str(p.version)): p.wheels for p in load_lock(path).packages}


def _wheel_entry(wheel: PackageWheel) -> dict[str, Any]:
    """A locked wheel as a ``[[packages.wheels]]`` table."""
    out: dict[str, Any] = {"name": wheel.filename}
    for key, value in (("url", wheel.url), ("path", wheel.path), ("size", wheel.size),
                       ("upload-time", wheel.upload_time)):
        if value is not None:
            out[key] = value
    out["hashes"] = dict(wheel.hashes)
    return out


def _wheel_tags(dist_info: Path) -> frozenset[Tag]:
    try:
        headers = BytesHeaderParser().parsebytes((dist_info / "WHEEL").read_bytes())
    except OSError:
        return frozenset()
    return frozenset(t for tag in headers.get_all("Tag", []) for t in parse_tag(tag))


def _archive(
    entry: dict[str, Any], info: dict[str, Any], tool: dict[str, Any]
) -> tuple[dict[str, Any], bool]:
    """A URL install: its hashes from direct_url.json, else (uv leaves them out)
    from the file itself when it is still on this disk."""
    url = str(info["url"])
    archive_info = info.get("archive_info") or {}
    hashes = dict(archive_info.get("hashes") or {})
    legacy = str(archive_info.get("hash", ""))
    if not hashes and "=" in legacy:
        algo, _, value = legacy.partition("=")
        hashes = {algo: value}
    local = Path(url.removeprefix("file://")) if url.startswith("file://") else None
    if not hashes and local is not None and local.is_file():
        hashes = {"sha256": hashlib.sha256(local.read_bytes()).hexdigest()}
    if not hashes:
        tool["url"] = url
        return entry, False
    filename = url.rsplit("/", 1)[-1]
    if filename.endswith(".whl"):
        entry["wheels"] = [{"name": filename, "url": url, "hashes": hashes}]
    else:
        entry["archive"] = {"url": url, "hashes": hashes}
    return entry, True


MAX_DIRECT_URL_BYTES = 1 << 20  # PEP 610's file is a few hundred bytes


def _direct_url(path: Path) -> dict[str, Any] | str:
    """``direct_url.json`` (PEP 610) checked as far as the snapshot uses it, or
    what is wrong with it: a venv is the user's, and one bad file is a warning
    about that package, not the end of the snapshot."""
    try:
        info = parse_json(read_regular(path, limit=MAX_DIRECT_URL_BYTES))
    except (OSError, Malformed) as exc:
        return str(exc) if isinstance(exc, Malformed) else exc.strerror or str(exc)
    if not isinstance(info, dict) or not isinstance(info.get("url"), str):
        return "not an object with a url (PEP 610)"
    for key, fields in (("vcs_info", ("vcs", "commit_id")), ("dir_info", ()),
                        ("archive_info", ())):
        if key in info:
            table = info[key]
            if not isinstance(table, dict) or not all(
                    isinstance(table.get(f), str) for f in fields):
                return f"{key} is not an object with {', '.join(fields) or 'keys'}"
    hashes = (info.get("archive_info") or {}).get("hashes") or {}
    if not isinstance(hashes, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in hashes.items()):
        return "archive_info.hashes is not an object of strings"
    return info


def _package(dist_info: Path, known: Known, warnings: list[str]
             ) -> tuple[dict[str, Any], bool]:
    """One ``[[packages]]`` entry and whether its origin is known."""
    meta = BytesHeaderParser().parsebytes((dist_info / "METADATA").read_bytes())
    name, version = str(meta["Name"]), str(meta["Version"])
    # PEP 751 wants the normalized name ("Pygments" -> "pygments")
    entry: dict[str, Any] = {"name": str(canonicalize_name(name)), "version": version}
    tool: dict[str, Any] = {}
    try:
        record = record_bytes(dist_info)
    except RecordError as exc:
        warnings.append(f"{exc.message}; {entry['name']} {version} is listed "
                        "without its RECORD's fingerprint")
        record = None
    if record is not None:
        tool["record-sha256"] = hashlib.sha256(record).hexdigest()
    installer = dist_info / "INSTALLER"
    if installer.is_file():
        tool["installer"] = installer.read_text("utf-8").strip()
    origin = True
    direct = dist_info / "direct_url.json"
    tags = _wheel_tags(dist_info)
    wheels = [
        _wheel_entry(w)
        for w in known.get((canonicalize_name(name), version), ())
        if wheel_tags(w) == tags
    ]
    info = _direct_url(direct) if not wheels and os.path.lexists(direct) else None
    if wheels:
        entry["wheels"] = wheels
    elif isinstance(info, str):
        warnings.append(f"{direct}: {info}; {entry['name']} {version} is listed "
                        "with an unknown origin")
        origin = False
    elif info is None:
        origin = False
    elif "vcs_info" in info:
        vcs = info["vcs_info"]
        entry["vcs"] = {"type": vcs["vcs"], "url": info["url"],
                        "commit-id": vcs["commit_id"]}
    elif "dir_info" in info:
        entry["directory"] = {"path": info["url"].removeprefix("file://"),
                              "editable": info["dir_info"].get("editable") is True}
    else:
        entry, origin = _archive(entry, info, tool)
    if not origin:
        entry.pop("archive", None)
        entry["directory"] = {"path": str(dist_info)}
        tool["origin"] = "unknown"
    entry["tool"] = {"stacklock": tool}
    return entry, origin


def _toolkit(venv: Path) -> dict[str, str] | None:
    """The toolkit this venv's activation file names, else $CUDA_HOME, else
    /usr/local/cuda; its version from version.json."""
    candidates = []
    activate = venv / "stacklock-activate.sh"
    if activate.is_file():
        for line in activate.read_text("utf-8").splitlines():
            if line.startswith("export CUDA_HOME="):
                candidates.append(line.split("=", 1)[1].strip("'\""))
    if os.environ.get("CUDA_HOME"):
        candidates.append(os.environ["CUDA_HOME"])
    candidates.append("/usr/local/cuda")
    for prefix in candidates:
        found = _toolkit_at(Path(prefix))
        if found:
            return found
    return None


def _toolkit_at(prefix: Path) -> dict[str, str] | None:
    """version.json where the toolkit has one; else ``bin/nvcc --version``, which
    knows only the X.Y release (toolkits from packages ship no version.json)."""
    try:
        data = parse_json(read_regular(prefix / "version.json", limit=1 << 20))
    except (OSError, ValueError):
        data = None
    version = str(data.get("cuda", {}).get("version", "")) if isinstance(
        data, dict) else ""
    if version:
        return {"version": version, "prefix": str(prefix.resolve())}
    nvcc = prefix / "bin" / "nvcc"
    if not nvcc.is_file():
        return None
    rc, out = SubprocessRunner().capture([str(nvcc), "--version"], timeout=30)
    if rc != 0:
        return None
    try:
        found = parse_nvcc_version(out)
    except CudaError:
        return None
    return {"version": found.release, "nvcc": found.version,
            "prefix": str(prefix.resolve()), "source": "nvcc --version"}


def _driver() -> str | None:
    try:
        return read_driver().version
    except CudaError:
        return None


def make_snapshot(venv: Path, *, path: str | Path = "",
                  warnings: list[str] | None = None) -> Lock:
    """What ``venv`` holds, as a lock (``path``: where it will be written). A
    file of one package that cannot be read as its format says is a line added
    to ``warnings``, and that package's origin is unknown."""
    warnings = [] if warnings is None else warnings
    site = site_packages(venv)
    known = _known_wheels(venv)
    packages = []
    unknown = []
    for dist_info in sorted(site.glob("*.dist-info")):
        if not (dist_info / "METADATA").is_file():
            continue
        entry, origin = _package(dist_info, known, warnings)
        packages.append(entry)
        if not origin:
            unknown.append(entry["name"])
    packages.sort(key=lambda p: canonicalize_name(p["name"]))
    doc: dict[str, Any] = {"lock-version": "1.0", "created-by": "stacklock"}
    python = _python_version(venv)
    if python:
        doc["requires-python"] = f"=={python}"
    doc["packages"] = packages
    tool: dict[str, Any] = {
        "snapshot": True,
        "venv": str(venv),
        "stacklock-version": __version__,
    }
    toolkit = _toolkit(venv)
    if toolkit:
        tool["toolkit"] = toolkit
    driver = _driver()
    if driver:
        tool["driver"] = driver
    tool["unknown-origin"] = sorted(unknown, key=canonicalize_name)
    doc["tool"] = {"stacklock": tool}
    return parse_lock_document(doc, path=str(path) or f"snapshot of {venv}")


def write_snapshot(venv: Path, path: Path, *,
                   warnings: list[str] | None = None) -> Path:
    return dump_lock(make_snapshot(venv, path=path, warnings=warnings), path)


@dataclass(frozen=True, kw_only=True)
class PatchesMade:
    """What ``snapshot --patches DIR`` wrote: a patch file per edited package,
    the ``[[patches]]`` stanza for a profile, and what could not be made one."""

    files: tuple[Path, ...]
    stanza: str
    notes: tuple[str, ...] = ()


def find_edits(venv: Path) -> dict[Path, list[str]]:
    """Per dist-info, the files (relative to site-packages) whose bytes differ
    from the RECORD installed with them, plus those the generation's lock
    patched (whose RECORD install rewrote): the files to compare with the wheel."""
    site = site_packages(venv)
    declared: dict[str, set[str]] = {}
    lock_path = installed_lock_path(venv)
    if lock_path is not None:
        for pkg in load_lock(lock_path).packages:
            for patch in pkg.tool.patches:
                declared.setdefault(pkg.name, set()).update(f.path for f in patch.files)
    out: dict[Path, list[str]] = {}
    for dist_info in sorted(site.glob("*.dist-info")):
        read = load_record(dist_info)
        if read is None:
            continue
        record = read.hashed
        name = canonicalize_name(dist_info.name.removesuffix(".dist-info")
                                 .partition("-")[0])
        edited = set(declared.get(name, ()))
        for path, digest in record.items():
            if path.startswith(dist_info.name + "/") or ".data/" in path \
                    or path.startswith("../"):
                continue
            try:
                with open(site / path, "rb", opener=open_regular) as fh:
                    found = hashlib.file_digest(fh, "sha256").hexdigest()
            except OSError:
                continue  # removed by hand: a patch deletes no file
            if found != sha256_of_digest(digest):
                edited.add(path)
        if edited:
            out[dist_info] = sorted(edited)
    return out


def write_patches(venv: Path, folder: Path, *, http: httpx.Client | None = None,
                  offline: bool = False) -> PatchesMade:
    """``stacklock snapshot --patches FOLDER``: each package of ``venv`` whose
    files differ from its wheel becomes ``FOLDER/<name>-<version>.patch`` (the
    wheel's files against the venv's, read from the artifact store or the index
    the generation's lock names), and the ``[[patches]]`` stanza naming them."""
    from stacklock._fs import cache_dir
    from stacklock.http import make_http_client
    from stacklock.metadata.members import read_wheel_files
    from stacklock.patches import render_file_diff
    from stacklock.store import ArtifactStore

    site = site_packages(venv)
    known = _known_wheels(venv)
    store = ArtifactStore(cache_dir() / "artifacts")
    files: list[Path] = []
    stanzas: list[str] = []
    notes: list[str] = []
    client = http or make_http_client()
    try:
        for dist_info, paths in find_edits(venv).items():
            meta = BytesHeaderParser().parsebytes((dist_info / "METADATA").read_bytes())
            name, version = str(canonicalize_name(str(meta["Name"]))), \
                str(meta["Version"])
            tags = _wheel_tags(dist_info)
            wheels = [w for w in known.get((name, version), ())
                      if wheel_tags(w) == tags and w.hashes.get("sha256")]
            if not wheels:
                notes.append(f"{name} {version}: {len(paths)} edited files, but no "
                             "lock of this venv names its wheel: no patch made")
                continue
            wheel = wheels[0]
            found = read_wheel_files(
                client, filename=wheel.filename, url=wheel.url,
                sha256=wheel.hashes["sha256"].lower(), size=wheel.size,
                wanted=paths, store=store, offline=offline,
                path=Path(wheel.path) if wheel.path else None)
            sections = []
            for path in paths:
                new = (site / path).read_bytes()
                old = found.files.get(path)
                if old is None or b"\0" in old or b"\0" in new:
                    notes.append(f"{name} {version}: {path} is binary or not in the "
                                 "wheel: left out of the patch")
                    continue
                sections.append(render_file_diff(path, old, new))
            text = "".join(sections)
            if not text:
                continue
            folder.mkdir(parents=True, exist_ok=True)
            target = folder / f"{name}-{version}.patch"
            atomic_write_bytes(target, text.encode("utf-8", "surrogateescape"),
                               shared=True)
            files.append(target)
            stanzas.append(
                f'[[patches]]\npackage = "{name}"\nversions = "=={version}"\n'
                f'file = "{target.as_posix()}"\n'
                f'reason = "hand edits found in {venv} (say why)"\n')
    finally:
        if http is None:
            client.close()
    return PatchesMade(files=tuple(files), stanza="\n".join(stanzas),
                       notes=tuple(notes))

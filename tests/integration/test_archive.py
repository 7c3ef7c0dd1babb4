"""``stacklock archive`` and ``install --archive``: real wheels (recorded from
PyPI) served by a loopback index that later empties, an archive in a folder
served by a plain static HTTP server and in a real S3 API server (moto's, on
loopback), and the real uv installing from what comes back."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from functools import partial
from http.server import SimpleHTTPRequestHandler
from pathlib import Path

import pytest

from stacklock.cli import main
from stacklock.runner import find_uv
from tests.helpers.install_server import Served, local_lock, sha256
from tests.helpers.jsonout import parse_output
from tests.helpers.loopback import loopback

PY = sys.executable
WHEELS = {"idna-3.20-py3-none-any.whl", "iniconfig-2.3.1-py3-none-any.whl",
          "six-1.17.0-py2.py3-none-any.whl"}


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.delenv("STACKLOCK_ARCHIVE", raising=False)
    monkeypatch.delenv("STACKLOCK_ARCHIVE_FIRST", raising=False)
    monkeypatch.chdir(tmp_path)


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _archive(capsys, lock: Path, dest: str) -> dict:
    code, out, err = _run(capsys, "archive", str(lock), dest, "--json")
    assert code == 0, err
    return parse_output(out, "archive")


def _install(capsys, lock: Path, venv: Path, *options: str) -> tuple[int, dict | str]:
    code, out, err = _run(capsys, "install", str(lock), "--venv", str(venv),
                          "--python", PY, "--no-validate", "--json", *options)
    return code, (parse_output(out, "install") if code == 0 else err)


def _versions(venv: Path) -> str:
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import six, idna, iniconfig; print(six.__version__, idna.__version__)"],
        check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def small_lock(server: tuple[str, Served], tmp_path: Path) -> Path:
    """The small lock, its wheels served by the loopback index."""
    base, served = server
    return local_lock(base, served, tmp_path / "pylock.small.toml")


def _gone(served: Served) -> None:
    """The original index stops serving the files (404 from now on), and the
    install runs as on another machine: nothing in its cache."""
    served.files.clear()
    served.requests.clear()
    shutil.rmtree(os.environ["STACKLOCK_CACHE_DIR"], ignore_errors=True)


def test_folder_archive_served_over_http_installs_when_the_index_is_gone(
        server: tuple[str, Served], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    base, served = server
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    folder = tmp_path / "archive"
    report = _archive(capsys, lock, str(folder))
    assert {f["filename"] for f in report["files"]} == WHEELS
    assert report["copied"] == 3 and report["present"] == 0
    for entry in report["files"]:  # content-addressed, the bytes as locked
        stored = folder / "files" / entry["sha256"] / entry["filename"]
        assert sha256(stored) == entry["sha256"]
    assert report["projects"] == ["idna", "iniconfig", "six"]
    again = _archive(capsys, lock, str(folder))  # nothing copied twice
    assert (again["copied"], again["present"]) == (0, 3)

    _gone(served)
    with loopback(partial(_Quiet, directory=str(folder))) as archive_url:
        code, result = _install(capsys, lock, tmp_path / "env",
                                "--archive", archive_url)
    assert code == 0, result
    assert _versions(tmp_path / "env") == "1.17.0 3.20"
    # every file was asked of the original first, which answered 404
    assert sorted(p.rsplit("/", 1)[-1] for p, _ in served.requests) == sorted(WHEELS)
    (note,) = [n for n in result["notes"] if "from the archive" in n]
    assert "3 files" in note and "HTTP 404" in note


def test_the_archive_is_a_pep_503_index_uv_installs_from(
        server: tuple[str, Served], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    base, served = server
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    folder = tmp_path / "archive"
    _archive(capsys, lock, str(folder))
    _gone(served)
    venv = tmp_path / "plain"
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    subprocess.run([find_uv(), "venv", "-q", "--python", PY, str(venv)],
                   check=True, env=env)
    with loopback(partial(_Quiet, directory=str(folder))) as archive_url:
        done = subprocess.run(
            [find_uv(), "pip", "install", "--python", str(venv / "bin" / "python"),
             "--index-url", f"{archive_url}/simple", "six==1.17.0", "idna==3.20",
             "iniconfig==2.3.1"], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert _versions(venv) == "1.17.0 3.20"


def test_wrong_bytes_in_the_archive_are_refused_and_nothing_is_installed(
        server: tuple[str, Served], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    base, served = server
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    folder = tmp_path / "archive"
    report = _archive(capsys, lock, str(folder))
    six = next(f for f in report["files"] if f["filename"].startswith("six-"))
    stored = folder / "files" / six["sha256"] / six["filename"]
    body = stored.read_bytes()
    stored.write_bytes(body[:10] + bytes([body[10] ^ 1]) + body[11:])
    _gone(served)
    venv = tmp_path / "env"
    code, err = _install(capsys, lock, venv, "--archive", str(folder))
    assert code == 2
    assert isinstance(err, str) and "sha256 mismatch" in err
    assert str(folder / "files" / six["sha256"]) in err
    assert not venv.exists() and not (tmp_path / "env.stacklock" / "1").exists()


def test_archive_first_never_asks_the_original(
        server: tuple[str, Served], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    base, served = server
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    folder = tmp_path / "archive"
    _archive(capsys, lock, f"file://{folder}")
    shutil.rmtree(tmp_path / "cache")
    served.requests.clear()
    code, result = _install(capsys, lock, tmp_path / "env",
                            "--archive", str(folder), "--archive-first")
    assert code == 0, result
    assert served.requests == []
    assert _versions(tmp_path / "env") == "1.17.0 3.20"


def test_an_unknown_host_falls_back_and_other_failures_do_not(
        server: tuple[str, Served], tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A host no resolver knows any more is gone (the offline guard of
    tests/helpers/isolation.py answers every name but localhost as unknown,
    EAI_NONAME, as a resolver does for a deleted host); a file the archive lacks
    is one line naming both, exit 2."""
    base, served = server
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    folder = tmp_path / "archive"
    _archive(capsys, lock, str(folder))
    shutil.rmtree(tmp_path / "cache")
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy",
                 "https_proxy", "all_proxy"):  # the name itself is looked up
        monkeypatch.delenv(name, raising=False)
    moved = tmp_path / "pylock.moved.toml"
    moved.write_text(lock.read_text().replace(base, "http://wheels.gone.invalid"))
    code, result = _install(capsys, moved, tmp_path / "env", "--archive", str(folder))
    assert code == 0, result
    (note,) = [n for n in result["notes"] if "from the archive" in n]
    assert "unknown host" in note

    empty = tmp_path / "empty"
    empty.mkdir()
    _gone(served)
    code, err = _install(capsys, lock, tmp_path / "env2", "--archive", str(empty))
    assert code == 2
    assert "HTTP 404, and the archive" in err and "has no copy" in err
    assert not (tmp_path / "env2").exists()


def test_bisect_reads_every_file_from_the_archive_when_the_index_is_gone(
        server: tuple[str, Served], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """bisect reads each changed wheel's METADATA (to group the changes) and
    installs each mix: both from the archive once the index is gone."""
    import tomlkit

    base, served = server
    bad = local_lock(base, served, tmp_path / "pylock.bad.toml")
    doc = tomlkit.parse(bad.read_text())
    kept = [p for p in doc["packages"] if p["name"] == "iniconfig"]
    doc["packages"] = tomlkit.aot()
    doc["packages"].extend(kept)
    good = tmp_path / "pylock.good.toml"
    good.write_text(tomlkit.dumps(doc))
    folder = tmp_path / "archive"
    _archive(capsys, bad, str(folder))
    _gone(served)
    oracle = ["python", "-c", "import importlib.util as u, sys\n"
              "sys.exit(u.find_spec('six') is not None)"]
    code, out, err = _run(capsys, "bisect", str(good), str(bad), "--python", PY,
                          "--archive", str(folder), "--dir", str(tmp_path / "b"),
                          "--json", "--", *oracle)
    assert code == 0, err
    (culprit,) = parse_output(out, "bisect")["culprits"]
    assert [c["name"] for c in culprit["changes"]] == ["six"]
    # each file was asked of the original (404) before the archive
    assert {p.rsplit("/", 1)[-1] for p, _ in served.requests} == WHEELS


# -- a real S3 API server (moto's server mode, on loopback) -------------------


@pytest.fixture(scope="session")
def s3_server():
    """moto's S3 API server in a thread on 127.0.0.1, once per test process."""
    from moto.server import ThreadedMotoServer

    running = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    running.start()
    host, port = running.get_host_and_port()
    yield f"http://{host}:{port}"
    running.stop()


@pytest.fixture
def bucket(s3_server: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """A fresh bucket; credentials and endpoint where every AWS tool reads them
    (the environment and an AWS config file), none in a URL or the lock."""
    import boto3

    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    config = tmp_path / "aws-config"
    config.write_text("[default]\nregion = us-east-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_server)
    name = f"archive-{tmp_path.name.lower().replace('_', '-')[-40:]}".rstrip("-")
    boto3.client("s3").create_bucket(Bucket=name)
    return name


def test_s3_archive_installs_when_the_index_is_gone(
        server: tuple[str, Served], tmp_path: Path, bucket: str,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3

    base, served = server
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    url = f"s3://{bucket}/stacks/nightly"
    report = _archive(capsys, lock, url)
    assert report["copied"] == 3
    s3 = boto3.client("s3")
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]}
    assert {f"stacks/nightly/files/{f['sha256']}/{f['filename']}"
            for f in report["files"]} <= keys
    assert "stacks/nightly/simple/six/index.html" in keys

    _gone(served)
    monkeypatch.setenv("STACKLOCK_ARCHIVE", url)  # the setting, not the flag
    code, result = _install(capsys, lock, tmp_path / "env")
    assert code == 0, result
    assert _versions(tmp_path / "env") == "1.17.0 3.20"
    assert any("3 files from the archive" in n for n in result["notes"])

    six = next(f for f in report["files"] if f["filename"].startswith("six-"))
    key = f"stacks/nightly/files/{six['sha256']}/{six['filename']}"
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    s3.put_object(Bucket=bucket, Key=key, Body=body[:-1] + bytes([body[-1] ^ 1]))
    shutil.rmtree(tmp_path / "cache")
    code, err = _install(capsys, lock, tmp_path / "env2")
    assert code == 2 and "sha256 mismatch" in str(err)
    assert not (tmp_path / "env2").exists()


def test_s3_without_credentials_is_one_line(
        server: tuple[str, Served], tmp_path: Path, bucket: str,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    base, served = server
    lock = local_lock(base, served, tmp_path / "pylock.small.toml")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    code, out, err = _run(capsys, "archive", str(lock), f"s3://{bucket}/x")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "no AWS credentials found" in err


@pytest.mark.parametrize("dest", ["s3://AKIAEXAMPLE:secret@bucket/x",
                                  "https://me:secret@wheels.example.com/a"])
def test_a_password_in_an_archive_url_is_never_printed(
        small_lock: Path, tmp_path: Path, dest: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    """An archive URL holding a password is refused (they come from the
    environment) without the password in the line a CI log keeps."""
    lock = small_lock
    code, out, err = _run(capsys, "archive", str(lock), dest)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert "secret" not in err and ":***@" in err
    code, out, err = _run(capsys, "install", str(lock), "--venv", str(tmp_path / "e"),
                          "--archive", dest, "--dry-run")
    assert "secret" not in out + err


def test_an_archive_that_is_a_file_is_one_line(
        small_lock: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    lock = small_lock
    afile = tmp_path / "archive.txt"
    afile.write_text("not a folder\n")
    for argv in (["archive", str(lock), str(afile)],
                 ["install", str(lock), "--venv", str(tmp_path / "e"),
                  "--archive", str(afile), "--dry-run"]):
        code, out, err = _run(capsys, *argv)
        assert out == ""
        assert (code, err) == (2, f"stacklock: error: {afile}: not a folder (try: "
                               "name a folder (made if missing), a file:// or "
                               "s3:// URL)\n"), err  # was: a cache hint
    assert afile.read_text() == "not a folder\n"


def test_an_empty_archive_is_refused_not_the_working_directory(
        small_lock: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``stacklock archive LOCK "$DEST"`` with DEST unset wrote the archive into
    the working directory; ``--archive ""`` went on with no archive."""
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    for argv, what in ((["archive", str(small_lock), ""], "DEST"),
                       (["install", str(small_lock), "--venv", str(tmp_path / "e"),
                         "--archive", " ", "--dry-run"], "--archive")):
        code, out, err = _run(capsys, *argv)
        assert (code, out) == (2, "")
        assert err.startswith(f"stacklock: error: {what} is empty (an unset "
                              "variable?)") and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before

"""Preflight: every problem found before anything changes, one line each."""

from __future__ import annotations

import platform
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomlkit
from uv import find_uv_bin

from stacklock.cli import main
from stacklock.errors import InstallError, LockError, PreflightError
from stacklock.install.interpreter import (
    find_base_python,
    probe_interpreter,
    remember_interpreter,
)
from stacklock.install.run import install_lock
from stacklock.install.selection import Wanted
from stacklock.runner import SubprocessRunner
from tests.helpers.install_server import SMALL_LOCK, tree_state
from tests.helpers.jsonout import parse_output

PY = sys.executable


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STACKLOCK_CACHE_DIR", str(tmp_path / "cache"))


def edited_lock(tmp_path: Path, edit: Any) -> Path:
    """The recorded lock, changed by ``edit(data)``, written as pylock.toml."""
    data = tomllib.loads(SMALL_LOCK.read_text("utf-8"))
    edit(data)
    path = tmp_path / "pylock.toml"
    path.write_text(tomlkit.dumps(data), "utf-8")
    return path


def problems(tmp_path: Path, lock: Path) -> list[str]:
    before = tree_state(tmp_path)
    with pytest.raises(PreflightError) as info:
        install_lock(lock, venv=tmp_path / "env", python=PY)
    assert tree_state(tmp_path) == before  # nothing changed
    assert all("\n" not in str(p) for p in info.value.problems)
    return [p.check for p in info.value.problems]


def test_a_wheel_without_sha256_is_a_lock_error(tmp_path: Path) -> None:
    def drop(data: dict[str, Any]) -> None:
        data["packages"][1]["wheels"][0]["hashes"] = {"md5": "0" * 32}

    with pytest.raises(LockError, match=r"packages\[1\] \(iniconfig\)\.wheels\[0\]"):
        install_lock(edited_lock(tmp_path, drop), venv=tmp_path / "env", python=PY)


def test_an_archive_is_planned_as_pep751_says(tmp_path: Path) -> None:
    def no_files(data: dict[str, Any]) -> None:  # PEP 751 allows an archive
        del data["packages"][2]["wheels"]
        data["packages"][2].pop("sdist", None)
        data["packages"][2]["archive"] = {"url": "https://example.org/six.zip",
                                          "hashes": {"sha256": "0" * 64}}

    result = install_lock(edited_lock(tmp_path, no_files), venv=tmp_path / "e",
                          python=PY, dry_run=True)
    (archive,) = [d for d in result.plan.downloads if d.kind == "archive"]
    assert (archive.url, archive.sha256) == ("https://example.org/six.zip", "0" * 64)
    assert "--no-binary" in result.plan.commands[1]  # a zip is built by uv


def test_an_sdist_without_sha256_is_refused(tmp_path: Path) -> None:
    def sdist_only(data: dict[str, Any]) -> None:
        del data["packages"][2]["wheels"]
        data["packages"][2]["sdist"] = {
            "name": "six-1.17.0.tar.gz", "url": "https://example.org/six.tar.gz",
            "hashes": {"md5": "0" * 32}}

    with pytest.raises(LockError, match=r"packages\[2\] \(six\)\.sdist: no sha256"):
        install_lock(edited_lock(tmp_path, sdist_only), venv=tmp_path / "e", python=PY)


def test_not_a_pep751_file(tmp_path: Path) -> None:
    bad = tmp_path / "pylock.toml"
    bad.write_text('[[packages]]\nname = "six"\n')
    with pytest.raises(LockError, match="not a PEP 751 lock"):
        install_lock(bad, venv=tmp_path / "env", python=PY)
    with pytest.raises(LockError, match="no such lock file"):
        install_lock(tmp_path / "missing.toml", venv=tmp_path / "env", python=PY)


def test_python_outside_requires_python(tmp_path: Path) -> None:
    lock = edited_lock(tmp_path, lambda d: d.update({"requires-python": "==3.99.*"}))
    assert problems(tmp_path, lock) == ["python"]


def test_no_matching_environment(tmp_path: Path) -> None:
    lock = edited_lock(
        tmp_path, lambda d: d.update({"environments": ["sys_platform == 'win32'"]})
    )
    assert problems(tmp_path, lock) == ["target"]


def test_other_platform_and_newer_glibc(tmp_path: Path) -> None:
    other = "linux_aarch64" if platform.machine() == "x86_64" else "linux_x86_64"
    target = {"python": "3.11", "platform": other, "manylinux": "2_99"}
    table = {"lock-version": 1, "target": target}
    lock = edited_lock(tmp_path, lambda d: d.update({"tool": {"stacklock": table}}))
    assert problems(tmp_path, lock) == ["platform", "glibc"]


def test_no_wheel_fits_the_sdist_is_built_as_select_does(tmp_path: Path) -> None:
    """PEP 751 (and ``Pylock.select()``): no wheel fits, so the sdist; uv builds
    it for the target, said in one note; ``--no-build`` refuses instead; with
    no sdist either, one line names the package."""
    def cp27(data: dict[str, Any]) -> None:
        wheel = data["packages"][2]["wheels"][0]
        wheel["url"] = wheel["url"].replace("py2.py3-none-any", "cp27-cp27mu-win32")

    lock = edited_lock(tmp_path, cp27)
    result = install_lock(lock, venv=tmp_path / "env", python=PY, dry_run=True)
    (six,) = [d for d in result.plan.downloads if d.filename.startswith("six")]
    assert (six.kind, six.filename) == ("sdist", "six-1.17.0.tar.gz")
    assert result.plan.commands[1][-7:-3] == ("--only-binary", ":all:",
                                              "--no-binary", "six")
    assert any("uv builds its sdist six-1.17.0.tar.gz" in n for n in result.notes)
    with pytest.raises(LockError, match=r"six: installs from its sdist .*"
                       "--no-build refuses"):
        install_lock(lock, venv=tmp_path / "env", python=PY, dry_run=True,
                     wanted=Wanted(no_build=True))

    def no_sdist(data: dict[str, Any]) -> None:
        cp27(data)
        del data["packages"][2]["sdist"]

    with pytest.raises(LockError, match="No wheel found matching the provided tags "
                       "for package 'six' at packages\\[2\\]"):
        install_lock(edited_lock(tmp_path, no_sdist), venv=tmp_path / "env",
                     python=PY, dry_run=True)


def test_requires_python_is_checked_first_then_every_problem_at_once(
        tmp_path: Path) -> None:
    def python(data: dict[str, Any]) -> None:
        data["requires-python"] = "==3.99.*"
        data["packages"][0]["wheels"][0]["size"] = 1 << 40  # 1 TiB, the most a
        # lock may say a file is

    assert problems(tmp_path, edited_lock(tmp_path, python)) == ["python"]

    def huge(data: dict[str, Any]) -> None:
        data["packages"][0]["wheels"][0]["size"] = 1 << 40  # 1 TiB each
        data["packages"][1]["wheels"][0]["size"] = 1 << 40

    assert problems(tmp_path, edited_lock(tmp_path, huge)) == ["disk"]


def test_cli_prints_each_problem_on_its_own_line_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lock = edited_lock(tmp_path, lambda d: d.update({"requires-python": "==3.99.*"}))
    rc = main(["install", str(lock), "--venv", str(tmp_path / "env"), "--python", PY])
    err = capsys.readouterr().err.splitlines()
    assert rc == 2
    assert err[0] == "stacklock: error: preflight failed, nothing was changed:"
    assert err[1].startswith("  python: ") and "(try: pass --python" in err[1]


def test_cli_dry_run_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lock = edited_lock(tmp_path, lambda d: None)
    argv = ["install", str(lock), "--venv", str(tmp_path / "env"), "--python", PY]
    assert main([*argv, "--dry-run", "--json"]) == 0
    out = parse_output(capsys.readouterr().out)
    assert out["dry_run"] is True
    assert [p["name"] for p in out["plan"]["packages"]] == ["idna", "iniconfig", "six"]
    sync = out["plan"]["commands"][1]
    assert sync[1:5] == ["pip", "sync", "--no-config", "--python"]
    assert "--require-hashes" in sync
    assert not (tmp_path / "env").exists()


def test_uv_python_discovery_and_the_probe() -> None:
    runner = SubprocessRunner()
    uv = str(find_uv_bin())
    found = find_base_python(
        f"{sys.version_info[0]}.{sys.version_info[1]}", uv=uv, runner=runner
    )
    interp = probe_interpreter(found, runner=runner)
    assert interp.version.startswith(f"{sys.version_info[0]}.{sys.version_info[1]}.")
    assert interp.machine == platform.machine()
    assert interp.glibc is not None and interp.glibc >= (2, 17)
    assert interp.tags[0].interpreter == f"cp3{sys.version_info[1]}"
    with pytest.raises(InstallError, match="--python"):
        find_base_python("3.1", uv=uv, runner=runner)


class _CountingRunner(SubprocessRunner):
    """The real runner, counting the processes it starts."""

    started = 0

    def capture(self, argv: Any, **kw: Any) -> tuple[int, str]:
        self.started += 1
        return super().capture(argv, **kw)


def test_the_probe_is_remembered_per_binary_once_an_install_goes_ahead(
    tmp_path: Path,
) -> None:
    runner = _CountingRunner()
    cache = tmp_path / "cache"
    fresh = probe_interpreter(PY, runner=runner, cache=cache)
    assert runner.started == 1 and not cache.exists()  # asking writes nothing
    remember_interpreter(fresh, cache)
    again = probe_interpreter(PY, runner=runner, cache=cache)
    assert runner.started == 1  # answered from the cache: no interpreter started
    assert again == fresh
    # a remembered answer that cannot be read is asked again, never trusted
    for entry in (cache / "interpreters").iterdir():
        entry.write_text("{not json")
    assert probe_interpreter(PY, runner=runner, cache=cache) == fresh
    assert runner.started == 2

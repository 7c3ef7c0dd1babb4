"""One exception tree for everything stacklock reports to a user.

    StacklockError          exit 2: bad input or an unusable environment;
     |                      exit 3 when ``network`` is set: a host did not answer
     +-- ProfileError       a profile file, key or value is wrong
     +-- IndexUnreadable    an index cannot be read (unreachable, not an index)
     +-- IndexesUnreachable exit 3: every index of a run that did not answer
     +-- MetadataError      a wheel's METADATA cannot be read
     |    +-- ZipReadError  the remote file is not a zip range reads can read
     |    +-- SdistBuildError  preparing an sdist's metadata failed
     +-- DownloadError      a download failed for good (after resuming)
     +-- HashMismatchError  downloaded bytes disagree with a recorded hash
     +-- LockError          a lock is missing, malformed or of an unknown version
     +-- OutputError        a file stacklock was asked to write cannot be written
     +-- CudaError          unknown toolkit, a driver that cannot run it
     |    +-- CudaMixError  wheels (or wheels and toolkit) of two CUDA majors
     |    +-- NoDriverError no NVIDIA driver on this machine
     +-- InstallError       an install step failed
     |    +-- PreflightError  preflight found problems; nothing was changed
     |    +-- NoSpaceError  exit 1: the disk filled; the old environment stays
     +-- ValidateError      validation could not run (not: a check failed)
     |    +-- ServerError   the serving engine could not serve (a gate finding)
     +-- FleetError         a fleet run could not start (no Ansible, no inventory)
     +-- NativeError        a wheel's shared objects cannot be read
     +-- PackError          a pack is unreadable, altered, or made for another node
     +-- RecordError        a RECORD (a wheel's, or an installed one) is malformed
 +-- PatchError         a declared patch is unreadable, malformed or refused
 |    +-- PatchConflictError  exit 1: a patch does not apply to its wheel's file
     +-- ResolutionError    exit 1: no set of candidates satisfies the profile
     +-- NativeCheckError   exit 1: a shared object needs what the lock lacks

Library code raises; only ``stacklock.cli`` catches, prints ``str(error)`` (one line,
plus the hint) and exits with ``error.exit_code``. Data lives on attributes so tests
and callers never parse messages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

__all__ = [
    "CudaError",
    "CudaMixError",
    "DownloadError",
    "FleetError",
    "HashMismatchError",
    "IndexUnreadable",
    "IndexesUnreachable",
    "InstallError",
    "LockError",
    "MetadataError",
    "NativeCheckError",
    "NativeError",
    "NoDriverError",
    "NoSpaceError",
    "OutputError",
    "PackError",
    "PatchConflictError",
    "PatchError",
    "PreflightError",
    "ProfileError",
    "RecordError",
    "ResolutionError",
    "SdistBuildError",
    "ServerError",
    "StacklockError",
    "ValidateError",
    "ZipReadError",
]


class StacklockError(Exception):
    """Base of every error a user can see. ``hint`` says what to try;
    ``network`` marks a failure of the network or of a host that did not answer
    (refused, reset, timed out, 5xx after retries), not of the input: exit 3."""

    exit_code = 2

    def __init__(self, message: str, *, hint: str | None = None,
                 network: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.network = network
        if network:
            self.exit_code = 3

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message} (try: {self.hint})"
        return self.message


class ProfileError(StacklockError):
    """A profile is wrong: ``path`` is the file, ``key`` the dotted key path,
    ``detail`` the message without them."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        key: str | None = None,
        hint: str | None = None,
    ) -> None:
        where = ": ".join(p for p in (path, key) if p)
        super().__init__(f"{where}: {message}" if where else message, hint=hint)
        self.path = path
        self.key = key
        self.detail = message  # without the file and key: for callers that name
        # the value's source another way (a command-line flag)


class IndexUnreadable(StacklockError):
    """An index could not be read; ``index`` is its name, ``url`` redacted."""

    def __init__(
        self, message: str, *, index: str, url: str, hint: str | None = None,
        network: bool = False,
    ) -> None:
        super().__init__(f"index {index!r} ({url}): {message}", hint=hint,
                         network=network)
        self.index = index
        self.url = url


class IndexesUnreachable(StacklockError):
    """Indexes that did not answer, all of them at once (one line each), not
    only the first the resolver met; ``errors`` holds each one's error."""

    exit_code = 3

    def __init__(self, errors: Sequence[IndexUnreadable]) -> None:
        if len(errors) == 1:
            message = errors[0].message
        else:
            message = f"{len(errors)} indexes did not answer:" + "".join(
                f"\n  {e.message}" for e in errors)
        super().__init__(message, hint=errors[0].hint, network=True)
        self.errors = tuple(errors)


class MetadataError(StacklockError):
    """A wheel's METADATA could not be read or parsed."""


class ZipReadError(MetadataError):
    """The remote file is not a zip range reads can read (the message says why)."""


class SdistBuildError(MetadataError):
    """Preparing an sdist's metadata failed; ``needs`` names what this machine
    lacks when the log says so, ``log`` is the build's log file."""

    def __init__(self, message: str, *, hint: str, needs: str | None,
                 log: Path) -> None:
        super().__init__(message, hint=hint)
        self.needs = needs
        self.log = log


class DownloadError(StacklockError):
    """A download failed for good (after resuming); ``url`` is redacted,
    ``status`` the HTTP status that refused it (None: no answer)."""

    def __init__(self, message: str, *, url: str, hint: str | None = None,
                 network: bool = False, status: int | None = None) -> None:
        super().__init__(f"{url}: {message}", hint=hint, network=network)
        self.url = url
        self.status = status


class HashMismatchError(StacklockError):
    """Bytes read from ``url`` hash to ``actual``, not ``expected``."""

    def __init__(self, *, url: str, expected: str, actual: str,
                 note: str = "") -> None:
        super().__init__(
            f"sha256 mismatch for {url}: expected {expected}, got {actual}"
            + (f"; {note}" if note else ""),
            hint="the file changed upstream or was tampered with; re-resolve with "
            "--refresh and review the diff",
        )
        self.url = url
        self.expected = expected
        self.actual = actual


class LockError(StacklockError):
    """A lock file is missing, malformed or of an unknown version."""


class OutputError(StacklockError):
    """A file stacklock was asked to write cannot be written there; ``path`` is
    the file. Raised before any work that would be thrown away."""

    def __init__(self, message: str, *, path: Path, hint: str | None = None
                 ) -> None:
        super().__init__(f"{path}: {message}", hint=hint)
        self.path = path


class CudaError(StacklockError):
    """A CUDA toolkit or driver problem."""


class NoDriverError(CudaError):
    """No NVIDIA driver on this machine: ``tried`` lists where it was looked
    for. Exit 2 where a driver is needed to go on; ``cuda check-driver``
    answers "no" (exit 1) instead."""

    def __init__(self, message: str, *, tried: Sequence[str],
                 hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.tried = tuple(tried)


class CudaMixError(CudaError):
    """Wheels (or wheels and toolkit) disagree on the CUDA major.
    ``wheels`` maps each CUDA major seen to the wheels that target it."""

    def __init__(self, message: str, *, wheels: dict[int, list[str]],
                 hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.wheels = wheels


class InstallError(StacklockError):
    """An install preflight or step failed."""


class PreflightError(InstallError):
    """Preflight found problems; nothing was changed. ``problems`` lists them
    (:class:`stacklock.install.preflight.Problem`, each one line as text)."""

    def __init__(self, problems: Sequence[object]) -> None:
        lines = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"preflight failed, nothing was changed:\n{lines}")
        self.problems = problems


class NoSpaceError(InstallError):
    """A file system filled during an install; the new generation was removed
    and the old one is left as it was."""

    exit_code = 1


class ValidateError(StacklockError):
    """Validation could not run at all."""


class ServerError(ValidateError):
    """The serving engine could not serve: the message is the one line the gate
    reports (caught by the gate, which records it as a finding)."""


class FleetError(StacklockError):
    """A fleet run could not start or gathered nothing (not: a host failed)."""


class PackError(StacklockError):
    """A pack is unreadable, altered, or made for another node; nothing changed.
    (Raised by the bootstrap inside a pack too: this module stays standard-library
    only.)"""


class RecordError(StacklockError):
    """A RECORD cannot be used: not CSV, over a bound, or a row whose path,
    digest or size an installer never writes (the message names the file and
    line: :mod:`stacklock.record`)."""


class PatchError(StacklockError):
    """A ``[[patches]]`` patch file cannot be used: unreadable, larger than
    allowed, not a unified diff, binary, a path outside the package, a file its
    wheel does not hold, or bytes other than the lock recorded."""


class PatchConflictError(PatchError):
    """A patch does not apply to its wheel's file (the code moved): the answer
    is "no", as for a conflict. ``package``, ``version``, ``path`` (the file)
    and ``hunk`` (its number, from 1) say where."""

    exit_code = 1

    def __init__(self, message: str, *, package: str, version: str, path: str,
                 hunk: int, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.package = package
        self.version = version
        self.path = path
        self.hunk = hunk


class ResolutionError(StacklockError):
    """No resolution exists; ``explanation`` holds the readable conflict."""

    exit_code = 1

    def __init__(self, explanation: str, *, hint: str | None = None) -> None:
        super().__init__(explanation, hint=hint)
        self.explanation = explanation


class NativeError(StacklockError):
    """A wheel's shared objects could not be read (network, broken zip or ELF)."""


class NativeCheckError(StacklockError):
    """Shared objects need sonames or symbols the lock does not provide;
    ``findings`` holds them (:class:`stacklock.native.check.Finding`)."""

    exit_code = 1

    def __init__(
        self, message: str, *, findings: tuple[object, ...], hint: str | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.findings = findings

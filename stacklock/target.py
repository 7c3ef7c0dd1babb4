"""The target platform a lock is for, which is not the host stacklock runs on.

A target turns into two things the rest of stacklock needs: the ordered list of
wheel tags it accepts (most preferred first, as pip and uv order them) and the PEP 508
marker environment that decides which dependencies apply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from packaging import tags
from packaging.version import InvalidVersion, Version

from stacklock.errors import ProfileError

__all__ = ["PLATFORMS", "Target"]

# platform -> (platform_machine, first manylinux glibc minor that exists for it)
PLATFORMS: dict[str, tuple[str, int]] = {
    "linux_x86_64": ("x86_64", 5),
    "linux_aarch64": ("aarch64", 17),
}
_LEGACY_MANYLINUX = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
_PYTHON_RE = re.compile(r"^3\.(\d+)(?:\.(\d+))?$")
_MANYLINUX_RE = re.compile(r"^2_(\d+)$")
_ARCH_RE = re.compile(r"^sm_(\d+)[a-z]?$")


@dataclass(frozen=True, kw_only=True)
class Target:
    """``python`` is "3.12" or "3.12.3"; ``manylinux`` the glibc floor, "2_28"."""

    python: str = "3.12"
    platform: str = "linux_x86_64"
    manylinux: str = "2_28"
    gpu_arch: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if not _PYTHON_RE.match(self.python):
            raise ProfileError(
                f"python {self.python!r} is not a CPython 3.x version",
                key="target.python",
                hint='write it as "3.12" or "3.12.3"',
            )
        if self.platform not in PLATFORMS:
            raise ProfileError(
                f"platform {self.platform!r} is not supported",
                key="target.platform",
                hint="one of " + ", ".join(sorted(PLATFORMS)),
            )
        if not _MANYLINUX_RE.match(self.manylinux):
            raise ProfileError(
                f"manylinux {self.manylinux!r} is not a glibc version like '2_28'",
                key="target.manylinux",
            )
        for arch in self.gpu_arch:
            if not _ARCH_RE.match(arch):
                raise ProfileError(
                    f"gpu-arch {arch!r} is not a compute capability like 'sm_120'",
                    key="target.gpu-arch",
                )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Target:
        return cls(
            python=str(data.get("python", "3.12")),
            platform=str(data.get("platform", "linux_x86_64")),
            manylinux=str(data.get("manylinux", "2_28")),
            gpu_arch=tuple(data.get("gpu-arch", ())),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "python": self.python,
            "platform": self.platform,
            "manylinux": self.manylinux,
            "gpu-arch": list(self.gpu_arch),
        }

    @property
    def machine(self) -> str:
        return PLATFORMS[self.platform][0]

    @property
    def python_minor(self) -> tuple[int, int]:
        m = _PYTHON_RE.match(self.python)
        assert m is not None
        return (3, int(m.group(1)))

    @property
    def python_full_version(self) -> Version:
        """The full version requires-python is checked against ("3.12" -> 3.12.0)."""
        text = self.python if self.python.count(".") == 2 else f"{self.python}.0"
        try:
            return Version(text)
        except InvalidVersion as exc:  # pragma: no cover - guarded by the regex
            raise ProfileError(str(exc), key="target.python") from exc

    @property
    def glibc(self) -> tuple[int, int]:
        return (2, int(self.manylinux.split("_")[1]))

    def platform_tags(self) -> list[str]:
        """manylinux_2_28_x86_64 ... manylinux_2_5_x86_64 with legacy aliases, then
        the bare linux tag, most preferred first."""
        machine, first = PLATFORMS[self.platform]
        out: list[str] = []
        for minor in range(self.glibc[1], first - 1, -1):
            out.append(f"manylinux_2_{minor}_{machine}")
            legacy = _LEGACY_MANYLINUX.get(minor)
            if legacy:
                out.append(f"{legacy}_{machine}")
        out.append(f"linux_{machine}")
        return out

    def tags(self) -> list[tags.Tag]:
        """Every wheel tag the target accepts, in preference order."""
        platforms = self.platform_tags()
        found = list(tags.cpython_tags(self.python_minor, platforms=platforms))
        found += list(
            tags.compatible_tags(
                self.python_minor,
                interpreter=f"cp3{self.python_minor[1]}",
                platforms=platforms,
            )
        )
        seen: set[tags.Tag] = set()
        ordered = []
        for tag in found:
            if tag not in seen:
                seen.add(tag)
                ordered.append(tag)
        return ordered

    def marker_environment(self) -> dict[str, str]:
        """The PEP 508 environment of a CPython on this target."""
        full = str(self.python_full_version)
        return {
            "implementation_name": "cpython",
            "implementation_version": full,
            "os_name": "posix",
            "platform_machine": self.machine,
            "platform_python_implementation": "CPython",
            "platform_release": "",
            "platform_system": "Linux",
            "platform_version": "",
            "python_full_version": full,
            "python_version": ".".join(map(str, self.python_minor)),
            "sys_platform": "linux",
        }

    def environment_marker(self) -> str:
        """A PEP 751 ``environments`` entry that describes this target."""
        env = self.marker_environment()
        return (
            f"python_version == '{env['python_version']}' and sys_platform == 'linux'"
            f" and platform_machine == '{env['platform_machine']}'"
        )

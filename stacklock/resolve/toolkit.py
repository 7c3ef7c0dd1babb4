"""Where resolution meets the CUDA module (``stacklock.cuda``).

Three calls, each made only when that part of ``stacklock.cuda`` is installed:
the requirements a ``[cuda] source = "pypi"`` toolkit adds, the
``[tool.stacklock.cuda]`` table of the lock, and the coherence check that tags each
locked wheel with the CUDA it targets (and refuses wheels of two CUDA majors).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    from stacklock.profile import Profile
    from stacklock.resolve.resolution import ResolvedPackage

__all__ = ["annotate", "extra_requirements", "lock_entry"]


def extra_requirements(profile: Profile) -> list[str]:
    try:
        from stacklock.cuda.lock_entry import pypi_requirements
    except ImportError:  # pragma: no cover - the CUDA module is optional
        return []
    return list(pypi_requirements(profile.cuda))


def lock_entry(profile: Profile) -> dict[str, Any] | None:
    try:
        from stacklock.cuda.lock_entry import make_lock_entry
    except ImportError:  # pragma: no cover
        return None
    return make_lock_entry(profile.cuda, profile.target)


def annotate(packages: Sequence[ResolvedPackage], profile: Profile
             ) -> tuple[list[ResolvedPackage], list[Any]]:
    """Each package with ``cuda`` set where its wheel names one, and the
    coherence findings; raises the CUDA module's CudaMixError on a mix."""
    try:
        from stacklock.cuda.coherence import PackageInfo, check_coherence, wheel_cuda
    except ImportError:  # pragma: no cover
        return list(packages), []
    infos = {
        p.name: PackageInfo(name=p.name, version=str(p.version),
                            filename=p.wheel.filename, index_url=p.index_url,
                            requires_dist=p.requires_dist)
        for p in packages
    }
    allow = profile.cuda.allow_mixed
    findings = check_coherence(infos.values(), profile.cuda.toolkit,
                               allow_mixed=allow)
    out = []
    for p in packages:
        target = wheel_cuda(infos[p.name], allow_mixed=allow)
        out.append(replace(p, cuda=target.cuda) if target is not None else p)
    return out, findings

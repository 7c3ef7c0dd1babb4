"""Where resolution meets the CUDA module (``stacklock.cuda``).

Three calls: the requirements a ``[cuda] source = "pypi"`` toolkit adds, the
``[tool.stacklock.cuda]`` table of the lock, and the coherence check that tags each
locked wheel with the CUDA it targets (and refuses wheels of two CUDA majors).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from stacklock.cuda.coherence import (
    CoherenceFinding,
    PackageInfo,
    check_coherence,
    wheel_cuda,
)
from stacklock.cuda.lock_entry import make_lock_entry, pypi_requirements
from stacklock.errors import CudaMixError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from stacklock.profile import Profile
    from stacklock.resolve.result import ResolvedPackage

__all__ = ["annotate", "extra_requirements", "lock_entry"]


def extra_requirements(profile: Profile) -> list[str]:
    return list(pypi_requirements(profile.cuda))


def lock_entry(profile: Profile) -> dict[str, Any] | None:
    return make_lock_entry(profile.cuda, profile.target)


def annotate(packages: Sequence[ResolvedPackage], profile: Profile
             ) -> tuple[list[ResolvedPackage], list[CoherenceFinding]]:
    """Each package with ``cuda`` set where its wheel names one, and the
    coherence findings; raises the CUDA module's CudaMixError on a mix when the
    profile declares a toolkit (without one, the mix is a warning finding)."""
    infos = {
        p.name: PackageInfo(name=p.name, version=str(p.version),
                            filename=p.wheel.filename if p.wheel else "",
                            index_url=p.index_url,
                            requires_dist=p.requires_dist,
                            dependencies=tuple(p.dependencies))
        for p in packages
    }
    allow = profile.cuda.allow_mixed
    findings = check_coherence(infos.values(), profile.cuda.toolkit,
                               allow_mixed=allow)
    present = set(infos)
    out = []
    for p in packages:
        try:
            target = wheel_cuda(infos[p.name], allow_mixed=allow, present=present)
        except CudaMixError:  # no toolkit declared: a warning finding, no label
            target = None
        out.append(replace(p, cuda=target.cuda) if target is not None else p)
    return out, findings

from __future__ import annotations

import pytest
from packaging.markers import Marker
from packaging.tags import Tag
from packaging.utils import parse_wheel_filename

from stacklock.errors import ProfileError
from stacklock.target import Target


def _fits(target: Target, filename: str) -> bool:
    accepted = set(target.tags())
    return bool(parse_wheel_filename(filename)[3] & accepted)


def test_tags_prefer_the_exact_interpreter_and_newest_glibc() -> None:
    tags = Target(python="3.12", manylinux="2_28").tags()
    assert tags[0] == Tag("cp312", "cp312", "manylinux_2_28_x86_64")
    assert tags.index(Tag("cp312", "abi3", "manylinux_2_28_x86_64")) < tags.index(
        Tag("py3", "none", "any")
    )


@pytest.mark.parametrize(
    ("filename", "fits"),
    [
        # real filenames from the recorded indexes and PyPI
        ("sgl_kernel-0.3.21+cu130-cp310-abi3-manylinux2014_x86_64.whl", True),
        ("torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl", True),
        ("torch-2.11.0-cp312-cp312-manylinux_2_28_aarch64.whl", False),
        ("torch-2.11.0-cp312-cp312-macosx_11_0_arm64.whl", False),
        ("torch-2.10.0-3-cp312-cp312-manylinux_2_28_x86_64.whl", True),
        ("torch-2.11.0-cp313-cp313-manylinux_2_28_x86_64.whl", False),
        ("flashinfer_python-0.6.4-py3-none-any.whl", True),
        ("numpy-2.3.0-cp312-cp312-manylinux_2_34_x86_64.whl", False),  # glibc too new
    ],
)
def test_wheel_fits_target(filename: str, fits: bool) -> None:
    assert _fits(Target(python="3.12", manylinux="2_28"), filename) is fits


def test_aarch64_starts_at_manylinux2014() -> None:
    target = Target(platform="linux_aarch64", manylinux="2_28")
    platforms = target.platform_tags()
    assert platforms[0] == "manylinux_2_28_aarch64"
    assert "manylinux2014_aarch64" in platforms
    assert "manylinux_2_16_aarch64" not in platforms
    assert _fits(target, "sgl_kernel-0.3.21+cu130-cp310-abi3-manylinux2014_aarch64.whl")


def test_marker_environment_is_the_targets_not_the_hosts() -> None:
    env = Target(python="3.12", platform="linux_aarch64").marker_environment()
    assert Marker(
        "platform_machine == 'aarch64' and python_version >= '3.12'"
    ).evaluate(env)
    assert not Marker("sys_platform == 'darwin'").evaluate(env)
    assert env["python_full_version"] == "3.12.0"


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"python": "2.7"}, "target.python"),
        ({"platform": "win_amd64"}, "target.platform"),
        ({"manylinux": "2014"}, "target.manylinux"),
        ({"gpu_arch": ("hopper",)}, "target.gpu-arch"),
    ],
)
def test_bad_target_names_the_key(kwargs: dict, key: str) -> None:
    with pytest.raises(ProfileError) as info:
        Target(**kwargs)
    assert info.value.key == key

from __future__ import annotations

from pathlib import Path

import pytest

from stacklock.errors import ProfileError
from stacklock.profile import PYPI_URL, list_profiles, load_profile, parse_profile

MINIMAL = {"requirements": {"packages": ["sglang==0.5.9"]}}


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / f"{name}.toml"
    path.write_text(text)
    return path


def test_no_index_means_pypi_alone() -> None:
    profile = parse_profile(MINIMAL, name="x")
    assert [(i.name, i.url) for i in profile.indexes] == [("pypi", PYPI_URL)]
    assert str(profile.requirements.packages[0]) == "sglang==0.5.9"
    assert profile.target.python == "3.12"


def test_full_schema_parses() -> None:
    data = {
        "profile": {"description": "d"},
        "target": {
            "python": "3.12",
            "platform": "linux_x86_64",
            "manylinux": "2_28",
            "gpu-arch": ["sm_120"],
        },
        "index": [
            {
                "name": "pytorch-nightly-cu130",
                "url": "https://download.pytorch.org/whl/nightly/cu130/",
                "packages": ["torch", "Torch_Vision"],
            },
            {"name": "pypi"},
        ],
        "requirements": {
            "packages": ["sglang==0.5.9", "flashinfer-python==0.6.4"],
            "overrides": ["torch>=2.11.0.dev0"],
            "prereleases": ["Torch"],
            "exclude-newer": "2026-02-15T00:00:00Z",
        },
        "cuda": {"toolkit": "13.0.1", "prefix": "/usr/local/cuda-13.0"},
        "validate": {"imports": ["torch"]},
    }
    profile = parse_profile(data, name="x")
    torch_index = profile.indexes[0]
    assert torch_index.url == "https://download.pytorch.org/whl/nightly/cu130"
    assert torch_index.packages == ("torch", "torch-vision")
    assert profile.indexes[1].url == PYPI_URL
    assert profile.requirements.prereleases == {"torch"}
    assert profile.requirements.exclude_newer is not None
    assert profile.requirements.exclude_newer.year == 2026
    assert profile.cuda.source == "runfile"  # a toolkit without a source is a runfile
    assert profile.target.gpu_arch == ("sm_120",)
    assert profile.validate == {"imports": ["torch"]}


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({**MINIMAL, "targte": {}}, "targte"),
        ({**MINIMAL, "target": {"pyhton": "3.12"}}, "target.pyhton"),
        ({"requirements": {"packages": ["torch>>2"]}}, "requirements.packages[0]"),
        ({"requirements": {"packages": "torch"}}, "requirements.packages"),
        ({**MINIMAL, "index": [{"name": "x"}]}, "index[0].url"),
        (
            {
                **MINIMAL,
                "index": [
                    {"name": "a", "url": "u", "packages": ["torch"]},
                    {"name": "b", "url": "v", "packages": ["torch"]},
                ],
            },
            "index[1].packages[0]",
        ),
        (
            {
                **MINIMAL,
                "index": [{"name": "a", "url": "u"}, {"name": "a", "url": "v"}],
            },
            "index[1].name",
        ),
        ({**MINIMAL, "cuda": {"source": "conda"}}, "cuda.source"),
        ({**MINIMAL, "cuda": {"source": "pypi"}}, "cuda.toolkit"),
        (
            {"requirements": {"packages": ["x"], "exclude-newer": "yesterday"}},
            "requirements.exclude-newer",
        ),
        (
            {"requirements": {"packages": ["x"], "exclude-newer": True}},
            "requirements.exclude-newer",
        ),
        ({"requirements": {"packages": []}}, "requirements.packages"),
        ({**MINIMAL, "target": {"platform": "win_amd64"}}, "target.platform"),
        ({**MINIMAL, "cuda": {"allow-mixed": "nvidia-cublas-cu12"}},
         "cuda.allow-mixed"),
        ({**MINIMAL, "cuda": {"allow-mixed": ["ok", "not a name!"]}},
         "cuda.allow-mixed[1]"),
        ({"requirements": {"packages": ["x"], "no-build": "yes"}},
         "requirements.no-build"),
        ({"requirements": {"packages": ["x"], "no-build": ["ok", "no way"]}},
         "requirements.no-build[1]"),
        ({"requirements": {"packages": ["x"], "build-requires": ["torch"]}},
         "requirements.build-requires"),
        ({"requirements": {"packages": ["x"],
                           "build-requires": {"flash-attn": ["torch=2"]}}},
         "requirements.build-requires.flash-attn[0]"),
        ({**MINIMAL, "validate": {"imprts": ["torch"]}}, "validate.imprts"),
        ({**MINIMAL, "validate": {"min-gpus": "8"}}, "validate.min-gpus"),
        ({**MINIMAL, "validate": {"gate": {"model": "m", "tp": 8}}},
         "validate.gate.tp"),
        ({**MINIMAL, "validate": {"probes": {"sizes": ["42 parsecs"]}}},
         "validate.probes.sizes[0]"),
        ({**MINIMAL, "target": {"python": 3.12}}, "target.python"),
        ({**MINIMAL, "index": [{"name": "pypi", "url": "https://pypi.org:70000/simple"}]},
         "index[0].url"),
        ({**MINIMAL, "index": [{"name": "m", "url": "https://host:abc/simple"}]},
         "index[0].url"),
        ({**MINIMAL, "index": [{"name": "m", "url": "https:///simple"}]},
         "index[0].url"),
        ({**MINIMAL, "index": [{"name": "m", "url": "https://u:secret@host:abc/s"}]},
         "index[0].url"),
        ({**MINIMAL, "archive": {"first": True}}, "archive.url"),
        ({**MINIMAL, "archive": {"url": "s3://b/p", "frist": True}}, "archive.frist"),
        ({**MINIMAL, "archive": {"url": "s3://b/p", "first": "yes"}}, "archive.first"),
        ({**MINIMAL, "archive": {"url": "archive/here"}}, "archive.url"),
        ({**MINIMAL, "archive": {"url": "https://u:secret@host/a"}}, "archive.url"),
        ({**MINIMAL, "archive": {"url": "s3:///prefix"}}, "archive.url"),
        ({**MINIMAL, "archive": {"url": "gs://bucket/p"}}, "archive.url"),
    ],
)
def test_bad_input_names_the_key(data: dict, key: str) -> None:
    with pytest.raises(ProfileError) as info:
        parse_profile(data, name="x", path="p.toml")
    assert info.value.key == key
    assert str(info.value).startswith(f"p.toml: {key}: ")
    assert "\n" not in str(info.value)
    assert "secret" not in str(info.value)  # a URL's password is never printed


def test_archive_is_a_url_every_machine_reads_the_same() -> None:
    for url in ("s3://team-wheels/stacklock", "https://wheels.example.com/a",
                "file:///srv/archive", "/srv/archive"):
        profile = parse_profile({**MINIMAL, "archive": {"url": url + "/"}}, name="x")
        assert profile.archive is not None
        assert (profile.archive.url, profile.archive.first) == (url, False)
    assert parse_profile(MINIMAL, name="x").archive is None


def test_no_build_and_build_requires() -> None:
    every = parse_profile({"requirements": {"packages": ["x"], "no-build": True}},
                          name="x").requirements
    assert every.refuses_build("python-nvd3") and every.refuses_build("x")
    some = parse_profile({"requirements": {
        "packages": ["x"], "no-build": ["Flash_Attn"],
        "build-requires": {"Flash_Attn": ["torch==2.9.1"]}}}, name="x").requirements
    assert some.refuses_build("flash-attn") and not some.refuses_build("deepspeed")
    assert [str(r) for r in some.build_requires["flash-attn"]] == ["torch==2.9.1"]
    default = parse_profile(MINIMAL, name="x").requirements
    assert not default.refuses_build("x") and default.build_requires == {}


def test_validate_tables_are_checked_when_the_profile_loads(tmp_path: Path) -> None:
    path = _write(tmp_path, "stack", """
[requirements]
packages = ["sglang==0.5.9"]

[validate.gate]
model = "moonshotai/Kimi-K2.5"
concurency = [1, 4]
""")
    with pytest.raises(ProfileError) as info:
        load_profile(str(path))
    assert info.value.path == str(path)
    assert info.value.key == "validate.gate.concurency"
    assert "unknown key 'concurency'" in str(info.value)


def test_a_float_python_version_is_refused_with_a_hint_to_quote_it() -> None:
    # TOML reads python = 3.10 as the float 3.1: never resolve for Python 3.1
    with pytest.raises(ProfileError) as info:
        parse_profile({**MINIMAL, "target": {"python": 3.10}}, name="x",
                      path="p.toml")
    assert info.value.key == "target.python"
    assert "expected a string, got 3.1" in str(info.value)
    assert info.value.hint is not None and info.value.hint.startswith("quote it")


def test_cuda_allow_mixed_is_a_list_of_normalized_names() -> None:
    data = {**MINIMAL, "cuda": {"toolkit": "13.0.3", "source": "pypi",
                                "allow-mixed": ["NVIDIA_Cutlass_DSL_libs_cu12"]}}
    assert parse_profile(data, name="x").cuda.allow_mixed == (
        "nvidia-cutlass-dsl-libs-cu12",)
    assert parse_profile(MINIMAL, name="x").cuda.allow_mixed == ()
    shipped = load_profile("pypi-cu130")  # the built-in profile that needs it
    assert shipped.cuda.allow_mixed == ("nvidia-cutlass-dsl-libs-cu12",)


def test_extends_merges_key_by_key(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "base",
        """
[target]
python = "3.12"
gpu-arch = ["sm_90"]
[requirements]
packages = ["sglang==0.5.9"]
overrides = ["torch>=2.11"]
""",
    )
    _write(
        tmp_path,
        "child",
        """
[profile]
extends = "base"
description = "child"
[target]
gpu-arch = ["sm_120"]
""",
    )
    profile = load_profile("child", tmp_path)
    assert profile.target.gpu_arch == ("sm_120",)
    assert profile.target.python == "3.12"
    assert [str(r) for r in profile.requirements.overrides] == ["torch>=2.11"]
    assert profile.description == "child"
    assert len(profile.sha256) == 64


def test_profile_hash_changes_with_the_file_it_extends(tmp_path: Path) -> None:
    _write(tmp_path, "base", '[requirements]\npackages = ["a"]\n')
    _write(tmp_path, "child", '[profile]\nextends = "base"\n')
    before = load_profile("child", tmp_path).sha256
    _write(tmp_path, "base", '[requirements]\npackages = ["b"]\n')
    assert load_profile("child", tmp_path).sha256 != before


def test_extends_cycle_is_an_error(tmp_path: Path) -> None:
    _write(tmp_path, "a", '[profile]\nextends = "b"\n')
    _write(tmp_path, "b", '[profile]\nextends = "a"\n')
    with pytest.raises(ProfileError, match="extends cycle: a -> b -> a"):
        load_profile("a", tmp_path)


def test_missing_parent_and_bad_toml(tmp_path: Path) -> None:
    _write(tmp_path, "a", '[profile]\nextends = "nope"\n')
    with pytest.raises(ProfileError, match="nope"):
        load_profile("a", tmp_path)
    _write(tmp_path, "bad", "[profile\n")
    with pytest.raises(ProfileError, match="not valid TOML"):
        load_profile("bad", tmp_path)
    with pytest.raises(ProfileError, match="no profile named 'zzz'"):
        load_profile("zzz", tmp_path)


def test_index_override_points_a_named_index_at_a_mirror() -> None:
    profile = parse_profile(MINIMAL, name="x")
    mirrored = profile.with_index_urls({"pypi": "http://127.0.0.1:9/simple/"})
    assert mirrored.indexes[0].url == "http://127.0.0.1:9/simple"
    with pytest.raises(ProfileError, match="no index named 'nope'"):
        profile.with_index_urls({"nope": "http://x"})
    with pytest.raises(ProfileError, match=r"--index pypi=http://h:99999/s: bad port"):
        profile.with_index_urls({"pypi": "http://h:99999/s"})
    # a folder or a file:// URL is judged where it is read, not here
    assert profile.with_index_urls({"pypi": "/srv/wheels"}).indexes[0].url == \
        "/srv/wheels"


def test_builtin_profiles_all_load() -> None:
    names = list_profiles()
    for name in names:
        profile = load_profile(name)
        assert profile.requirements.packages, name


def test_shipped_profiles_pin_a_cut_off_or_say_they_do_not(tmp_path: Path) -> None:
    """Every built-in profile resolves as of a moment (``exclude-newer``), but for
    the nightly one, which says ``exclude-newer = false`` over the cut-off of the
    profile it extends, with the reason in a comment."""
    import tomllib

    from stacklock.profile import BUILTIN_DIR

    for path in sorted(BUILTIN_DIR.glob("*.toml")):
        raw = tomllib.loads(path.read_text("utf-8"))["requirements"]
        cut_off = load_profile(str(path)).requirements.exclude_newer
        if path.stem.endswith("-nightly"):
            assert raw["exclude-newer"] is False and cut_off is None, path.name
            assert "# No cut-off" in path.read_text("utf-8")
        else:
            assert cut_off is not None, path.name
    # false also undoes an inherited cut-off in a profile of one's own
    _write(tmp_path, "base", '[requirements]\npackages = ["x"]\n'
           'exclude-newer = "2026-12-02T00:00:00Z"\n')
    child = _write(tmp_path, "child", '[profile]\nextends = "base"\n'
                   "[requirements]\nexclude-newer = false\n")
    assert load_profile(str(child)).requirements.exclude_newer is None

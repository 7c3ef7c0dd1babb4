"""A build that fails on what the target Python took out of its standard
library is told apart from one that lacks a build requirement.

The logs are real (tests/data/sdist/build-logs/, scripts/record_build_logs.py):
CPython 3.12 building pathtools 0.1.2 (``import imp``), numpy 1.23.5 (its
pinned setuptools imports ``distutils``; pypa/build says only "Backend ... is
not available", the traceback is the one the exception carried) and Theano
1.0.5 (``configparser.SafeConfigParser``). The same logs on a Python that
still has those say nothing: the build would have failed for another reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from stacklock.metadata.build import diagnose_build_log
from stacklock.metadata.removals import find_removal

LOGS = Path(__file__).resolve().parents[1] / "data" / "sdist" / "build-logs"


@pytest.mark.parametrize(("log", "what", "removed_in", "line"), [
    ("build-pathtools-0.1.2.tar.gz.log", "imp", "3.12",
     "ModuleNotFoundError: No module named 'imp'"),
    ("build-numpy-1.23.5.tar.gz.log", "distutils", "3.12",
     "ModuleNotFoundError: No module named 'distutils'"),
    ("build-Theano-1.0.5.tar.gz.log", "configparser.SafeConfigParser", "3.12",
     "AttributeError: module 'configparser' has no attribute 'SafeConfigParser'."
     " Did you mean: 'RawConfigParser'?"),
])
def test_a_real_log_names_what_python_3_12_removed(log, what, removed_in, line):
    text = (LOGS / log).read_text()
    found = find_removal(text, (3, 12))
    assert found is not None
    assert (found.what, found.removed_in, found.line) == (what, removed_in, line)
    assert find_removal(text, (3, 13)) == found  # still gone later
    assert find_removal(text, (3, 11)) is None  # there then: not the cause
    assert diagnose_build_log(text) is None  # nothing this machine could add


def test_a_module_of_the_project_s_own_is_no_removal():
    assert find_removal("ModuleNotFoundError: No module named 'torch'", (3, 13)) is None
    assert find_removal("ImportError: cannot import name 'Mapping' from "
                        "'collections.abc'", (3, 13)) is None
    found = find_removal("ImportError: cannot import name 'Mapping' from "
                         "'collections' (/usr/lib/python3.10/collections)", (3, 10))
    assert found is not None and found.what == "collections.Mapping"
